use std::process::ExitCode;

fn main() -> ExitCode {
    orch::cli::main()
}
