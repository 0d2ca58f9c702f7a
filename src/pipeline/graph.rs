//! The phase DAG: build it, report cycles as whole paths, split it into
//! stages, and select sub-graphs (`--phase`, `--from`).
//!
//! Edges go from a dependency to its dependent. Every algorithm here is
//! iterative, so a 100,000-phase chain cannot overflow the stack.

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use petgraph::Direction;
use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Bfs, IntoNeighbors, Reversed, VisitMap, Visitable};

use super::Pipeline;

/// A validated, acyclic phase graph. Node `i` is `pipeline.phases[i]`.
#[derive(Debug, Clone)]
pub struct PhaseGraph {
    graph: DiGraph<(), ()>,
    /// Stage of each phase: 0 for phases with no dependencies, else one more
    /// than the latest stage among its dependencies.
    stage_of: Vec<usize>,
}

/// A cycle as phase indices, first phase repeated at the end.
pub(crate) type Cycle = Vec<usize>;

/// The phases' dependency edges as the file declares them, cycles and
/// all (an unknown name or a phase naming itself is no edge): what every
/// walk along `depends_on` reads, on a pipeline that may not be valid yet.
/// Node `i` is `pipeline.phases[i]`; edges go from a dependency to its
/// dependent.
#[derive(Debug, Clone)]
pub(crate) struct Dependencies {
    graph: DiGraph<(), ()>,
    /// Each phase's stage ([`PhaseGraph`]) when the edges have no cycle:
    /// a dependency's stage is always lower than its dependent's, which
    /// lets [`Dependencies::depends_on`] answer most questions without a
    /// walk.
    stage_of: Option<Vec<usize>>,
}

impl Dependencies {
    pub(crate) fn of(pipeline: &Pipeline) -> Self {
        let n = pipeline.phases.len();
        let mut graph = DiGraph::with_capacity(n, n);
        for _ in 0..n {
            graph.add_node(());
        }
        for (i, p) in pipeline.phases.iter().enumerate() {
            for d in &p.depends_on {
                if let Some(j) = pipeline.phase_index(d)
                    && i != j
                {
                    graph.add_edge(NodeIndex::new(j), NodeIndex::new(i), ());
                }
            }
        }
        let stage_of = stages(&graph);
        Dependencies { graph, stage_of }
    }

    /// Every phase `phase` depends on, directly or not, in declaration
    /// order (`phase` itself only when it is on a cycle).
    pub(crate) fn ancestors(&self, phase: usize) -> Vec<usize> {
        ancestors(&self.graph, phase)
    }

    /// Whether `before` is among [`Dependencies::ancestors`] of `phase`.
    /// Without cycles, a phase only depends on phases of lower stages, so
    /// the walk up from `phase` stops at once when `before` is not lower,
    /// skips every phase at or below `before`'s stage, and ends when it
    /// meets `before`: asked once per phase, the usual answer costs no walk
    /// and no allocation (a walk of the whole ancestry per question made
    /// `validate` of a long chain quadratic).
    pub(crate) fn depends_on(&self, phase: usize, before: usize) -> bool {
        let Some(stage_of) = &self.stage_of else {
            return self.ancestors(phase).binary_search(&before).is_ok();
        };
        let floor = stage_of[before];
        if stage_of[phase] <= floor {
            return false;
        }
        let mut seen = HashSet::new();
        let mut todo = vec![phase];
        while let Some(v) = todo.pop() {
            for u in self
                .graph
                .neighbors_directed(NodeIndex::new(v), Direction::Incoming)
            {
                let u = u.index();
                if u == before {
                    return true;
                }
                if stage_of[u] > floor && seen.insert(u) {
                    todo.push(u);
                }
            }
        }
        false
    }
}

impl PhaseGraph {
    /// Build the graph; on cycles, every cycle (one per strongly connected
    /// component) as a path.
    pub fn build(pipeline: &Pipeline) -> Result<Self, Vec<Cycle>> {
        Self::of(Dependencies::of(pipeline))
    }

    /// The graph of these edges, or its cycles.
    pub(crate) fn of(deps: Dependencies) -> Result<Self, Vec<Cycle>> {
        match deps.stage_of {
            Some(stage_of) => Ok(Self {
                graph: deps.graph,
                stage_of,
            }),
            None => Err(find_cycles(&deps.graph)),
        }
    }

    #[cfg(test)]
    fn from_graph(graph: DiGraph<(), ()>) -> Result<Self, Vec<Cycle>> {
        let stage_of = stages(&graph);
        Self::of(Dependencies { graph, stage_of })
    }

    pub(crate) fn len(&self) -> usize {
        self.graph.node_count()
    }

    /// Stages in order; each a set of phases (declaration order) that can run
    /// together once the earlier stages are done.
    pub fn stages(&self) -> Vec<Vec<usize>> {
        let count = self.stage_of.iter().max().map_or(0, |m| m + 1);
        let mut stages = vec![Vec::new(); count];
        for (i, &s) in self.stage_of.iter().enumerate() {
            stages[s].push(i);
        }
        stages
    }

    /// Stages restricted to `selected` (indices), keeping their relative order.
    pub(crate) fn stages_of(&self, selected: &[usize]) -> Vec<Vec<usize>> {
        let mut keep = vec![false; self.len()];
        for &i in selected {
            keep[i] = true;
        }
        self.stages()
            .into_iter()
            .map(|s| s.into_iter().filter(|&i| keep[i]).collect::<Vec<_>>())
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// Dependency edges `(from, to)`: `to` depends on `from`.
    pub fn edges(&self) -> Vec<(usize, usize)> {
        let mut e: Vec<(usize, usize)> = self
            .graph
            .raw_edges()
            .iter()
            .map(|e| (e.source().index(), e.target().index()))
            .collect();
        e.sort_unstable_by_key(|&(a, b)| (b, a));
        e
    }

    /// Direct dependencies of a phase.
    pub(crate) fn dependencies(&self, phase: usize) -> Vec<usize> {
        let mut d: Vec<usize> = self
            .graph
            .neighbors_directed(NodeIndex::new(phase), Direction::Incoming)
            .map(|n| n.index())
            .collect();
        d.sort_unstable();
        d
    }

    /// `roots` and everything downstream of them, in declaration order.
    pub(crate) fn downstream(&self, roots: &[usize]) -> Vec<usize> {
        reach(&self.graph, roots)
    }

    /// `roots` and everything they depend on, in declaration order.
    pub(crate) fn upstream(&self, roots: &[usize]) -> Vec<usize> {
        reach(Reversed(&self.graph), roots)
    }

    /// Every phase `phase` depends on, directly or not, in declaration
    /// order.
    pub(crate) fn ancestors(&self, phase: usize) -> Vec<usize> {
        ancestors(&self.graph, phase)
    }
}

/// The one walk up the phase graph: what `phase` depends on, directly or
/// not, in declaration order.
fn ancestors(graph: &DiGraph<(), ()>, phase: usize) -> Vec<usize> {
    let direct: Vec<usize> = graph
        .neighbors_directed(NodeIndex::new(phase), Direction::Incoming)
        .map(|n| n.index())
        .collect();
    reach(Reversed(graph), &direct)
}

/// `roots` and every phase reached from them along `graph`'s edges
/// (petgraph's breadth-first walk), in declaration order.
fn reach<G>(graph: G, roots: &[usize]) -> Vec<usize>
where
    G: IntoNeighbors<NodeId = NodeIndex> + Visitable,
    G::Map: VisitMap<NodeIndex>,
{
    let mut bfs = Bfs {
        stack: Default::default(),
        discovered: graph.visit_map(),
    };
    for &r in roots {
        if bfs.discovered.visit(NodeIndex::new(r)) {
            bfs.stack.push_back(NodeIndex::new(r));
        }
    }
    let mut seen: Vec<usize> = std::iter::from_fn(|| bfs.next(graph))
        .map(|n| n.index())
        .collect();
    seen.sort_unstable();
    seen
}

/// Each node's stage: 0 without dependencies, else one more than the
/// latest stage among its dependencies. `None` when the graph has a cycle.
fn stages(graph: &DiGraph<(), ()>) -> Option<Vec<usize>> {
    let order = topological_order(graph)?;
    let mut stage_of = vec![0; graph.node_count()];
    for &v in &order {
        let s = graph
            .neighbors_directed(v, Direction::Incoming)
            .map(|u| stage_of[u.index()] + 1)
            .max()
            .unwrap_or(0);
        stage_of[v.index()] = s;
    }
    Some(stage_of)
}

/// Kahn's algorithm, taking ready nodes in declaration order. `None` when
/// the graph has a cycle.
fn topological_order(graph: &DiGraph<(), ()>) -> Option<Vec<NodeIndex>> {
    let n = graph.node_count();
    let mut indegree: Vec<usize> = (0..n)
        .map(|i| {
            graph
                .neighbors_directed(NodeIndex::new(i), Direction::Incoming)
                .count()
        })
        .collect();
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = indegree
        .iter()
        .enumerate()
        .filter(|(_, d)| **d == 0)
        .map(|(i, _)| std::cmp::Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(v)) = ready.pop() {
        order.push(NodeIndex::new(v));
        for w in graph.neighbors_directed(NodeIndex::new(v), Direction::Outgoing) {
            indegree[w.index()] -= 1;
            if indegree[w.index()] == 0 {
                ready.push(std::cmp::Reverse(w.index()));
            }
        }
    }
    (order.len() == n).then_some(order)
}

/// One cycle per non-trivial strongly connected component, starting at its
/// first-declared phase and following dependencies (`a -> b` means `a`
/// depends on `b`), shortest way round.
fn find_cycles(graph: &DiGraph<(), ()>) -> Vec<Cycle> {
    let mut cycles = Vec::new();
    for scc in kosaraju_scc(graph) {
        if scc.len() < 2 {
            continue;
        }
        let mut in_scc = vec![false; graph.node_count()];
        for v in &scc {
            in_scc[v.index()] = true;
        }
        let start = scc.iter().map(|v| v.index()).min().unwrap_or(0);
        // BFS along "depends on" (incoming edges) back to start.
        let mut prev: HashMap<usize, usize> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        let mut closing = None;
        'search: while let Some(v) = queue.pop_front() {
            let mut deps: Vec<usize> = graph
                .neighbors_directed(NodeIndex::new(v), Direction::Incoming)
                .map(|n| n.index())
                .filter(|&w| in_scc[w])
                .collect();
            deps.sort_unstable();
            for w in deps {
                if w == start {
                    closing = Some(v);
                    break 'search;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = prev.entry(w) {
                    e.insert(v);
                    queue.push_back(w);
                }
            }
        }
        let Some(mut v) = closing else { continue };
        let mut path = vec![v];
        while v != start {
            v = prev[&v];
            path.push(v);
        }
        path.reverse();
        path.push(start);
        cycles.push(path);
    }
    cycles.sort();
    cycles
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(n: usize, deps: &[(usize, usize)]) -> Result<PhaseGraph, Vec<Cycle>> {
        let mut g = DiGraph::new();
        for _ in 0..n {
            g.add_node(());
        }
        for &(phase, dep) in deps {
            g.add_edge(NodeIndex::new(dep), NodeIndex::new(phase), ());
        }
        PhaseGraph::from_graph(g)
    }

    #[test]
    fn ancestors_are_everything_upstream_in_declaration_order() {
        // 0 <- 1 <- 3, 0 <- 2 <- 3, 4 alone.
        let g = graph(5, &[(1, 0), (2, 0), (3, 1), (3, 2)]).unwrap();
        assert_eq!(g.ancestors(3), [0, 1, 2]);
        assert_eq!(g.ancestors(1), [0]);
        assert!(g.ancestors(0).is_empty());
        assert!(g.ancestors(4).is_empty());
        assert_eq!(g.upstream(&[3, 4]), [0, 1, 2, 3, 4]);
        assert_eq!(g.downstream(&[1]), [1, 3]);
        assert!(g.upstream(&[]).is_empty());
    }

    #[test]
    fn stages_follow_longest_path() {
        // 0; 1 <- 0; 2 <- 0; 3 <- 1, 2; 4 (independent)
        let g = graph(5, &[(1, 0), (2, 0), (3, 1), (3, 2)]).unwrap();
        assert_eq!(g.stages(), vec![vec![0, 4], vec![1, 2], vec![3]]);
        assert_eq!(g.downstream(&[1]), vec![1, 3]);
        assert_eq!(g.upstream(&[3]), vec![0, 1, 2, 3]);
        assert_eq!(g.stages_of(&[1, 3]), vec![vec![1], vec![3]]);
    }

    #[test]
    fn cycles_are_whole_paths() {
        // 0 depends on 2, 1 on 0, 2 on 1: 0 -> 2 -> 1 -> 0
        let cycles = graph(4, &[(0, 2), (1, 0), (2, 1), (3, 0)]).unwrap_err();
        assert_eq!(cycles, vec![vec![0, 2, 1, 0]]);
    }

    #[test]
    fn long_chain_does_not_overflow() {
        let n = 100_000;
        let deps: Vec<(usize, usize)> = (1..n).map(|i| (i, i - 1)).collect();
        let g = graph(n, &deps).unwrap();
        assert_eq!(g.stages().len(), n);
        let mut cyclic = deps.clone();
        cyclic.push((0, n - 1));
        let cycles = graph(n, &cyclic).unwrap_err();
        assert_eq!(cycles[0].len(), n + 1);
    }
}
