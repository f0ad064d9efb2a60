//! The commands a repository's GitHub Actions workflows run (`jobs.<job>.steps[].run`),
//! read so the Coder can run the project's tests the way its CI does.
//!
//! A workflow is repository text, so it is parsed within bounds: from yaml-rust2's event
//! stream one event at a time (its `load` recurses once per nesting level), into a small
//! tree of at most [`MAX_NODES`] nodes nested at most [`MAX_DEPTH`] deep. An alias
//! (`*name`) is never expanded — it reads as nothing — so a file of nested aliases cannot
//! grow into billions of nodes. A file past a bound, or not YAML, gives no steps.

use yaml_rust2::parser::{Event, Parser};

/// Most nodes read from one workflow.
const MAX_NODES: usize = 50_000;
/// Deepest nesting read.
const MAX_DEPTH: usize = 64;
/// Most characters of a workflow parsed.
pub const MAX_WORKFLOW_CHARS: usize = 256 * 1024;

/// A YAML value as far as workflows need it.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Scalar(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
    /// An alias, or nothing.
    Null,
}

impl Node {
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Node::Scalar(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(s),
            _ => None,
        }
    }
}

/// One `run:` step of a workflow job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunStep {
    /// The step's `name`, if it has one.
    pub name: Option<String>,
    /// Its `run` script.
    pub run: String,
}

/// The `run` steps of the workflow `text`, job by job in the file's order; none when the
/// text is not a workflow or passes a bound.
pub fn run_steps(text: &str) -> Vec<RunStep> {
    if text.chars().count() > MAX_WORKFLOW_CHARS {
        return Vec::new();
    }
    let Some(doc) = parse(text) else {
        return Vec::new();
    };
    let Some(Node::Map(jobs)) = doc.get("jobs") else {
        return Vec::new();
    };
    let mut steps = Vec::new();
    for (_, job) in jobs {
        let Some(Node::Seq(items)) = job.get("steps") else {
            continue;
        };
        for step in items {
            if let Some(run) = step.get("run").and_then(Node::as_str) {
                steps.push(RunStep {
                    name: step.get("name").and_then(Node::as_str).map(str::to_owned),
                    run: run.to_owned(),
                });
            }
        }
    }
    steps
}

/// The first document of `text` as a [`Node`], or `None` past a bound or on a YAML error.
fn parse(text: &str) -> Option<Node> {
    let mut parser = Parser::new_from_str(text);
    // Open collections, each with the key waiting for its value (maps).
    let mut stack: Vec<(Node, Option<Node>)> = Vec::new();
    let mut nodes = 0;
    loop {
        let (event, _) = parser.next_token().ok()?;
        let node = match event {
            Event::StreamStart | Event::DocumentStart | Event::Nothing => continue,
            Event::StreamEnd | Event::DocumentEnd => return None,
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if stack.len() >= MAX_DEPTH {
                    return None;
                }
                let open = if matches!(event, Event::SequenceStart(..)) {
                    Node::Seq(Vec::new())
                } else {
                    Node::Map(Vec::new())
                };
                stack.push((open, None));
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => stack.pop()?.0,
            Event::Scalar(value, ..) => Node::Scalar(value),
            Event::Alias(_) => Node::Null,
        };
        nodes += 1;
        if nodes > MAX_NODES {
            return None;
        }
        let Some((parent, key)) = stack.last_mut() else {
            // The document's root is complete.
            return Some(node);
        };
        match parent {
            Node::Seq(items) => items.push(node),
            Node::Map(entries) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
            Node::Scalar(_) | Node::Null => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_steps_of_each_job_in_order() {
        let workflow = r#"
name: CI
on: [push, pull_request]
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: ruff check .
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/setup-python@v5
        with: {python-version: "3.11"}
      - name: Install
        run: pip install -e '.[test]'
      - name: Run the tests
        run: |
          python -m pytest -q --maxfail=1
"#;
        assert_eq!(
            run_steps(workflow),
            [
                RunStep {
                    name: None,
                    run: "ruff check .".into()
                },
                RunStep {
                    name: Some("Install".into()),
                    run: "pip install -e '.[test]'".into()
                },
                RunStep {
                    name: Some("Run the tests".into()),
                    run: "python -m pytest -q --maxfail=1\n".into()
                },
            ]
        );
    }

    #[test]
    fn aliases_are_never_expanded_and_bounds_hold() {
        // Nine levels of nine aliases each would be 387 million nodes expanded.
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for (name, prev) in ["b", "c", "d", "e", "f", "g", "h", "i"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
        {
            bomb.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{prev}"); 9].join(", ")
            ));
        }
        bomb.push_str("jobs:\n  t:\n    steps:\n      - run: *i\n      - run: make test\n");
        assert_eq!(
            run_steps(&bomb),
            [RunStep {
                name: None,
                run: "make test".into()
            }]
        );
        let deep = format!("jobs: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(run_steps(&deep).is_empty());
        let wide = format!(
            "jobs:\n  t:\n    steps: [{}]\n",
            vec!["1"; 60_000].join(",")
        );
        assert!(run_steps(&wide).is_empty());
        assert!(run_steps("jobs: [unclosed").is_empty());
        assert!(run_steps("just text").is_empty());
        assert!(run_steps(&"x".repeat(MAX_WORKFLOW_CHARS + 1)).is_empty());
    }
}
