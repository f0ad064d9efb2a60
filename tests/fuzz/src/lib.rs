//! What the fuzz targets share: the workbench the tool-arguments target calls every PM and
//! Coder tool in, and the confinement that makes calling the writing tools safe.
//!
//! Write, Edit and MultiEdit run for real, on a scratch worktree, because where they write
//! is exactly what must not go wrong. Before any call the process confines itself with
//! Landlock (the kernel's, fully enforced or the target refuses to start): it may write only
//! under its scratch directory and the fuzz crate's own directory (corpus and artifacts).
//! Bash is never run; its arguments are checked as a call checks them. Tools that reach the
//! controller (GitCommit, OpenPR, WebFetch, ReadMemory, AskUser, Notify) talk to recording
//! fakes of the traits they use.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use codebutler_agent::tool::{ToolError, ToolRegistry};
use codebutler_agent::tools::grep::Grep;
use codebutler_agent::tools::list_files::ListFiles;
use codebutler_agent::tools::path::RepoRoot;
use codebutler_agent::tools::read_file::ReadFile;
use codebutler_agent::tools::repository_tools;
use codebutler_controller::config::ReviewFrom;
use codebutler_controller::domain::{IncomingMessage, ThreadKey};
use codebutler_controller::memory::source::DefaultBranchMemory;
use codebutler_controller::pm::tools::{GhStatus, ListThreads, ProposePlan, ReadMemory};
use codebutler_controller::store::Store;
use codebutler_controller::workspace::write_access::WriteAccess;
use codebutler_proto::runner::v1::RunnerEvent;
use codebutler_proto::runner::v1::runner_event::Event;
use codebutler_runner::tools::{
    AskUserTool, BashConfig, BashTool, CommitResult, EditTool, FetchFailure, FetchedPage, Forge,
    ForgeFailure, GitCommitTool, MemoryFailure, MemorySource, MultiEditTool, NotifyTool,
    OpenPrTool, Questions, ReadMemoryTool, WebFetchTool, WebSource, WriteTool,
};
use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, path_beneath_rules,
};
use tokio::sync::mpsc;

/// The files of the scratch worktree, put back before every call.
pub const FIXTURES: &[(&str, &str)] = &[
    ("README.md", "# Demo\n\nRun `make`.\n"),
    ("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n"),
    (
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    ),
    ("docs/notes.txt", "one\ntwo\nthree\n"),
];

/// What lies next to the worktree, where no tool may write.
pub const SENTINEL: &str = "outside.txt";
const SENTINEL_TEXT: &str = "not yours\n";

/// Every tool with its fakes, over a scratch worktree, in a confined process.
pub struct Workbench {
    pub runtime: tokio::runtime::Runtime,
    /// Holds the scratch directory: the worktree (whose commit the PM's memory is read
    /// from), the sentinel, the store.
    _scratch: tempfile::TempDir,
    pub parent: PathBuf,
    pub root: PathBuf,
    pub registry: ToolRegistry,
    pub bash: BashTool,
    pub web: Arc<RecordingWeb>,
    pub forge: Arc<RecordingForge>,
    pub store: Store,
    pub thread: ThreadKey,
}

impl Workbench {
    /// Builds the scratch worktree (a git repository with one commit), the store and every
    /// tool, then confines the process. Panics if the confinement is not fully enforced.
    pub fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let parent = scratch.path().canonicalize().unwrap();
        let root = parent.join("worktree");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(parent.join(SENTINEL), SENTINEL_TEXT).unwrap();
        std::os::unix::fs::symlink(parent.join(SENTINEL), root.join("escape-link")).unwrap();
        reset(&root);
        commit(&root);
        let store = runtime
            .block_on(Store::open(&parent.join("store.db")))
            .unwrap();
        let thread = ThreadKey {
            channel: "C0CHAN".into(),
            thread_ts: "1700000000.000100".into(),
        };
        // The thread's first message makes its row, which ProposePlan records plans in.
        let first = IncomingMessage {
            channel: thread.channel.clone(),
            ts: thread.thread_ts.clone(),
            thread_ts: thread.thread_ts.clone(),
            user: "U0ALICE".into(),
            text: "please fix session expiry".into(),
            event_id: Some("Ev1".into()),
            origin: codebutler_controller::domain::Origin::Person,
        };
        assert!(runtime.block_on(store.record_message(&first)).unwrap());

        let repo_root = Arc::new(RepoRoot::new(&root).unwrap());
        let web = Arc::new(RecordingWeb::default());
        let forge = Arc::new(RecordingForge::default());
        let questions = Questions::new();
        let (events, receiver) = mpsc::channel(64);
        runtime.spawn(answer_questions(receiver, Arc::clone(&questions)));

        let mut registry = ToolRegistry::new(32 * 1024);
        for tool in repository_tools(Arc::clone(&repo_root)) {
            registry.register(tool);
        }
        registry
            .register(Arc::new(ReadFile::worktree(Arc::clone(&repo_root))))
            .register(Arc::new(WriteTool::new(Arc::clone(&repo_root))))
            .register(Arc::new(EditTool::new(Arc::clone(&repo_root))))
            .register(Arc::new(MultiEditTool::new(Arc::clone(&repo_root))))
            .register(Arc::new(Grep::worktree(Arc::clone(&repo_root))))
            .register(Arc::new(ListFiles::worktree(Arc::clone(&repo_root))))
            .register(Arc::new(GitCommitTool::new(forge.clone())))
            .register(Arc::new(OpenPrTool::new(forge.clone())))
            .register(Arc::new(WebFetchTool::new(web.clone())))
            .register(Arc::new(ReadMemoryTool::new(Arc::new(FixedMemory))))
            .register(Arc::new(AskUserTool::new(questions, events.clone())))
            .register(Arc::new(NotifyTool::new(events)))
            .register(Arc::new(ReadMemory::new(DefaultBranchMemory::new(&root))))
            .register(Arc::new(ListThreads::new(store.clone())))
            .register(Arc::new(GhStatus::new(
                PathBuf::from("/nonexistent/gh"),
                root.clone(),
                WriteAccess::new(
                    ReviewFrom::Write,
                    PathBuf::from("/nonexistent/gh"),
                    root.clone(),
                ),
            )))
            .register(Arc::new(ProposePlan::new(
                store.clone(),
                thread.clone(),
                Arc::new(Mutex::new(None)),
            )));
        let bash = BashTool::new(repo_root, BashConfig::default());

        confine(&[&parent, Path::new(env!("CARGO_MANIFEST_DIR"))]);
        Self {
            runtime,
            _scratch: scratch,
            parent,
            root,
            registry,
            bash,
            web,
            forge,
            store,
            thread,
        }
    }

    /// Puts the worktree's files back as they were.
    pub fn reset(&self) {
        reset(&self.root);
    }

    /// Fails if anything outside the worktree changed: the sentinel beside it, or the
    /// repository's metadata.
    pub fn check_confined(&self, call: &str) {
        let sentinel = std::fs::read_to_string(self.parent.join(SENTINEL)).unwrap_or_default();
        assert_eq!(sentinel, SENTINEL_TEXT, "{call} wrote outside the worktree");
        let mut names: Vec<String> = std::fs::read_dir(&self.parent)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("store.db"))
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["outside.txt", "worktree"],
            "{call} created a file outside the worktree"
        );
        let head = std::fs::read_to_string(self.root.join(".git/HEAD")).unwrap_or_default();
        assert_eq!(head, "ref: refs/heads/main\n", "{call} changed .git");
    }
}

impl Default for Workbench {
    fn default() -> Self {
        Self::new()
    }
}

/// Writes the fixtures and removes everything else the tools made (but `.git` and the
/// link that points outside).
fn reset(root: &Path) {
    for entry in std::fs::read_dir(root).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == ".git" || name == "escape-link" {
            continue;
        }
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    for (rel, text) in FIXTURES {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Makes `root` a repository on `main` with the fixtures committed.
fn commit(root: &Path) {
    let repo = git2::Repository::init(root).unwrap();
    repo.set_head("refs/heads/main").unwrap();
    let mut index = repo.index().unwrap();
    for (rel, _) in FIXTURES {
        index.add_path(Path::new(rel)).unwrap();
    }
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let who = git2::Signature::new("Fuzz", "fuzz@localhost", &git2::Time::new(0, 0)).unwrap();
    repo.commit(Some("HEAD"), &who, &who, "fixtures", &tree, &[])
        .unwrap();
}

/// Confines the process with Landlock: everything readable, writes only beneath `writable`.
fn confine(writable: &[&Path]) {
    let abi = ABI::V3;
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(writable, AccessFs::from_all(abi))))
        .and_then(|r| r.restrict_self())
        .unwrap_or_else(|e| panic!("confine the fuzz process with Landlock: {e}"));
    assert_eq!(
        status.ruleset,
        RulesetStatus::FullyEnforced,
        "Landlock is not fully enforced: the writing tools are not fuzzed unconfined"
    );
}

/// Answers every question AskUser sends, so its calls return.
async fn answer_questions(mut events: mpsc::Receiver<RunnerEvent>, questions: Arc<Questions>) {
    while let Some(event) = events.recv().await {
        if let Some(Event::Question(q)) = event.event {
            questions.answer(&q.question_id, format!("answer to {:?}", q.text));
        }
    }
}

/// A web that serves one small page and records the URLs asked for.
#[derive(Default)]
pub struct RecordingWeb {
    pub asked: Mutex<Vec<String>>,
}

#[async_trait]
impl WebSource for RecordingWeb {
    async fn fetch(&self, url: &str, _max_bytes: u64) -> Result<FetchedPage, FetchFailure> {
        self.asked.lock().unwrap().push(url.to_owned());
        Ok(FetchedPage {
            status: 200,
            content_type: "text/html".into(),
            body: b"<h1>Docs</h1><p>Read <a href=\"https://x.example\">this</a>.</p>".to_vec(),
            truncated: false,
            final_url: url.to_owned(),
        })
    }
}

/// A forge that records commit messages and pull requests.
#[derive(Default)]
pub struct RecordingForge {
    pub commits: Mutex<Vec<String>>,
    pub pulls: Mutex<Vec<(String, String)>>,
}

#[async_trait]
impl Forge for RecordingForge {
    async fn commit(
        &self,
        message: &str,
        _include: &[String],
    ) -> Result<CommitResult, ForgeFailure> {
        self.commits.lock().unwrap().push(message.to_owned());
        Ok(CommitResult {
            sha: "0123456789abcdef".into(),
            files_changed: vec!["src/main.rs".into()],
            nothing_to_commit: false,
            left_out: Vec::new(),
        })
    }

    async fn open_pr(&self, title: &str, body: &str) -> Result<String, ForgeFailure> {
        self.pulls
            .lock()
            .unwrap()
            .push((title.to_owned(), body.to_owned()));
        Ok("https://github.com/acme/app/pull/7".into())
    }
}

/// Memory for `pm` and `artist`; any other role is unknown.
struct FixedMemory;

#[async_trait]
impl MemorySource for FixedMemory {
    async fn read_memory(&self, role: &str) -> Result<(String, String), MemoryFailure> {
        match role {
            "" | "pm" => Ok(("pm".into(), "# PM memory\n- uses make\n".into())),
            "artist" => Ok(("artist".into(), String::new())),
            other => Err(MemoryFailure::UnknownRole(format!("no memory for {other}"))),
        }
    }
}

/// Whether a tool error is one the model can read: a non-empty, one-paragraph message.
pub fn readable(error: &ToolError) -> bool {
    let text = error.to_string();
    !text.trim().is_empty()
}
