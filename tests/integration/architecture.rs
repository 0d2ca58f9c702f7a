//! The layers of `ARCHITECTURE.md` hold in the code: every path into the
//! crate (`use crate::…`, `crate::…` in an expression or a type, `super::`
//! up to the crate's root, and `crate::…` inside a macro's tokens) from
//! code outside `#[cfg(test)]` points to a module on a lower floor, and the
//! table names every top-level module there is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

use crate::support::root;

/// The table between the layer markers: module name to floor.
fn floors(architecture: &str) -> BTreeMap<String, usize> {
    let start = architecture
        .find("<!-- layers:")
        .expect("ARCHITECTURE.md has the layers marker");
    let end = architecture[start..]
        .find("<!-- end layers -->")
        .expect("ARCHITECTURE.md closes the layers table")
        + start;
    let mut out = BTreeMap::new();
    for line in architecture[start..end].lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(floor) = cells.get(1).and_then(|c| c.parse::<usize>().ok()) else {
            continue;
        };
        for module in cells[2].split(',') {
            let name = module.trim().trim_matches('`');
            assert!(
                out.insert(name.to_string(), floor).is_none(),
                "`{name}` is on two floors of ARCHITECTURE.md"
            );
        }
    }
    out
}

/// An arrow from one top-level module to another, where it is written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Arrow {
    file: String,
    line: usize,
    from: String,
    to: String,
}

/// The module path of a source file of the library (`src/a/b.rs` is
/// `a::b`, `src/a/mod.rs` and `src/a.rs` are `a`), or `None` for the
/// crate's roots.
fn module_path(rel: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .iter()
        .skip(1) // src
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if parts.is_empty() && (stem == "lib" || stem == "main") {
        return None;
    }
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    Some(parts)
}

/// `#[cfg(test)]`, or any `cfg` that names `test` and no `not`
/// (`#[cfg(any(test, feature = "test-fixtures"))]`): code for tests.
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    fn idents(tokens: TokenStream, out: &mut Vec<String>) {
        for t in tokens {
            match t {
                TokenTree::Ident(i) => out.push(i.to_string()),
                TokenTree::Group(g) => idents(g.stream(), out),
                _ => {}
            }
        }
    }
    attrs.iter().any(|a| {
        let mut words = Vec::new();
        if a.path().is_ident("cfg")
            && let Ok(tokens) = a.parse_args::<TokenStream>()
        {
            idents(tokens, &mut words);
        }
        words.iter().any(|w| w == "test") && !words.iter().any(|w| w == "not")
    })
}

struct Finder<'a> {
    file: &'a str,
    /// The module the visitor is in (inline modules pushed on).
    module: Vec<String>,
    arrows: Vec<Arrow>,
    /// `mod x;` declarations under `#[cfg(test)]`: files that are tests.
    test_mods: Vec<Vec<String>>,
}

impl Finder<'_> {
    /// A path's first segments as written: where it lands at the top.
    fn land(&mut self, segments: &[String], line: usize) {
        let to = match segments.first().map(String::as_str) {
            Some("crate") => segments.get(1).cloned(),
            Some("super") => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                if ups >= self.module.len() {
                    segments.get(ups).cloned()
                } else {
                    self.module.first().cloned()
                }
            }
            _ => None,
        };
        let (Some(to), Some(from)) = (to, self.module.first().cloned()) else {
            return;
        };
        if to != from && to != "self" {
            self.arrows.push(Arrow {
                from,
                to,
                file: self.file.to_string(),
                line,
            });
        }
    }

    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, t) in trees.iter().enumerate() {
            match t {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if id == "crate" || id == "super" => {
                    // `crate :: name` (a `::` is two `:` punctuations).
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) =
                        (trees.get(j), trees.get(j + 1))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        match trees.get(j + 2) {
                            Some(TokenTree::Ident(next)) => segments.push(next.to_string()),
                            _ => break,
                        }
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.land(&segments, id.span().start().line);
                    }
                }
                _ => {}
            }
        }
    }
}

fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, usize)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((path, n.ident.span().start().line));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((path, r.ident.span().start().line));
        }
        syn::UseTree::Glob(g) => {
            let mut path = prefix.clone();
            path.push("*".into());
            out.push((path, g.star_token.span.start().line));
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Union(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if is_cfg_test(attrs) {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                let mut path = self.module.clone();
                path.push(m.ident.to_string());
                self.test_mods.push(path);
            }
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&f.attrs) {
            visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.module.push(m.ident.to_string());
            visit::visit_item_mod(self, m);
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut out = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut out);
        for (path, line) in out {
            self.land(&path, line);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = p.segments.first() {
            self.land(&segments, first.ident.span().start().line);
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }
}

/// Every arrow between top-level modules in these files (path relative to
/// the repository, text), outside test code.
fn arrows(files: &[(PathBuf, String)]) -> Vec<Arrow> {
    let mut found = Vec::new();
    let mut test_mods: BTreeSet<Vec<String>> = BTreeSet::new();
    for (rel, text) in files {
        let Some(module) = module_path(rel) else {
            continue;
        };
        let parsed = syn::parse_file(text)
            .unwrap_or_else(|e| panic!("{}: not Rust syn can parse: {e}", rel.display()));
        let file = rel.display().to_string();
        let mut finder = Finder {
            file: &file,
            module: module.clone(),
            arrows: Vec::new(),
            test_mods: Vec::new(),
        };
        finder.visit_file(&parsed);
        found.push((module, finder.arrows));
        test_mods.extend(finder.test_mods);
    }
    let mut out: Vec<Arrow> = found
        .into_iter()
        .filter(|(module, _)| !test_mods.iter().any(|t| module.starts_with(t)))
        .flat_map(|(_, a)| a)
        .collect();
    out.sort();
    out
}

/// The arrows that break the layers: up, or across one floor.
fn violations(arrows: &[Arrow], floors: &BTreeMap<String, usize>) -> Vec<String> {
    let mut out = Vec::new();
    for a in arrows {
        match (floors.get(&a.from), floors.get(&a.to)) {
            (Some(f), Some(t)) if t < f => {}
            (Some(f), Some(t)) => out.push(format!(
                "{}:{}: `{}` (floor {f}) imports `{}` (floor {t}): {}",
                a.file,
                a.line,
                a.from,
                a.to,
                if t == f {
                    "modules on one floor do not import each other"
                } else {
                    "an arrow up"
                }
            )),
            (None, _) => out.push(format!(
                "{}:{}: `{}` is on no floor of ARCHITECTURE.md",
                a.file, a.line, a.from
            )),
            (_, None) => out.push(format!(
                "{}:{}: `{}` imports `{}`, which is on no floor of ARCHITECTURE.md",
                a.file, a.line, a.from, a.to
            )),
        }
    }
    out
}

fn library_files() -> Vec<(PathBuf, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(root).unwrap().to_path_buf();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &root().join("src"), &mut out);
    out
}

#[test]
fn every_import_points_down_the_floors_of_architecture_md() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let floors = floors(&text);
    let files = library_files();
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|(rel, _)| module_path(rel))
        .filter_map(|m| m.first().cloned())
        .collect();
    let named: BTreeSet<String> = floors.keys().cloned().collect();
    assert_eq!(
        tops, named,
        "ARCHITECTURE.md's layer table must name exactly the top-level modules of src/"
    );
    let arrows = arrows(&files);
    assert!(
        arrows.len() > 100,
        "the import reader found only {} arrows: it is broken",
        arrows.len()
    );
    let bad = violations(&arrows, &floors);
    assert!(
        bad.is_empty(),
        "imports that break the layers of ARCHITECTURE.md:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_layer_check_sees_every_way_to_name_a_module() {
    let floors: BTreeMap<String, usize> = [("model", 1), ("store", 2), ("engine", 3)]
        .into_iter()
        .map(|(m, f)| (m.to_string(), f))
        .collect();
    let file = |path: &str, text: &str| (PathBuf::from(path), text.to_string());
    let files = vec![
        file(
            "src/model/a.rs",
            "use crate::{engine::Run, store};\nfn f() { crate::store::open(); }\n",
        ),
        file(
            "src/model/b.rs",
            "fn f() { let _ = format!(\"{}\", crate::engine::name()); }\n",
        ),
        file(
            "src/store/c.rs",
            "use super::super::engine::X;\nuse super::d::Y;\n",
        ),
        file(
            "src/store/d.rs",
            "use crate::model::Kind;\nstruct S(crate::engine::T);\n",
        ),
        file(
            "src/store/e.rs",
            "#[cfg(test)]\nmod tests {\n    use crate::engine::Fake;\n}\n#[cfg(test)]\nmod helpers;\n",
        ),
        file("src/store/e/helpers.rs", "use crate::engine::Fake;\n"),
        file(
            "src/engine/f.rs",
            "use crate::model::Kind;\nuse crate::store::Db;\n",
        ),
    ];
    let bad = violations(&arrows(&files), &floors);
    assert_eq!(
        bad,
        vec![
            "src/model/a.rs:1: `model` (floor 1) imports `engine` (floor 3): an arrow up",
            "src/model/a.rs:1: `model` (floor 1) imports `store` (floor 2): an arrow up",
            "src/model/a.rs:2: `model` (floor 1) imports `store` (floor 2): an arrow up",
            "src/model/b.rs:1: `model` (floor 1) imports `engine` (floor 3): an arrow up",
            "src/store/c.rs:1: `store` (floor 2) imports `engine` (floor 3): an arrow up",
            "src/store/d.rs:2: `store` (floor 2) imports `engine` (floor 3): an arrow up",
        ]
    );
}
