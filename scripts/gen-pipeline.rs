//! Print a generated pipeline file (the same generator `benches/load.rs`
//! uses). Not a Cargo target: `scripts/measure-validate.sh` compiles it with
//! `rustc`, and so can you:
//!
//!     rustc --edition 2024 -O -o /tmp/gen-pipeline scripts/gen-pipeline.rs
//!     /tmp/gen-pipeline 1000 > /tmp/p1000.toml
//!     /tmp/gen-pipeline 100000 --chain > /tmp/chain.toml
//!
//! The figures a correct load must reproduce go to stderr as one line:
//! `phases=N invocations=N edges=N stages=N`.

#[path = "../benches/support/pipeline_gen.rs"]
mod pipeline_gen;

use std::io::Write;

fn main() {
    let mut n = None;
    let mut topology = pipeline_gen::Topology::Layered;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--chain" => topology = pipeline_gen::Topology::Chain,
            "--layered" => topology = pipeline_gen::Topology::Layered,
            other => match other.parse::<usize>() {
                Ok(v) if v >= 1 && n.is_none() => n = Some(v),
                _ => usage(),
            },
        }
    }
    let Some(n) = n else { usage() };
    let g = pipeline_gen::generate(n, topology);
    let mut stdout = std::io::stdout().lock();
    if stdout.write_all(g.text.as_bytes()).is_err() {
        std::process::exit(1);
    }
    eprintln!(
        "phases={} invocations={} edges={} stages={}",
        g.phases, g.invocations, g.edges, g.stages
    );
}

fn usage() -> ! {
    eprintln!("usage: gen-pipeline PHASES [--chain | --layered]");
    std::process::exit(2);
}
