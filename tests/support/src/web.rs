//! `PageServer`: a local web server standing for a site on the web, serving the pages a test
//! gives it over plain HTTP on `127.0.0.1`, recording the path of every request it receives
//! (so a test can check a host the fetch rules refuse was never contacted).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

/// A page: its content type and body.
type Page = (String, String);

#[derive(Default)]
struct Site {
    pages: HashMap<String, Page>,
    requests: Vec<String>,
}

/// A local web server; it stops when dropped.
pub struct PageServer {
    pub addr: SocketAddr,
    site: Arc<Mutex<Site>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl std::fmt::Debug for PageServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl PageServer {
    /// Starts a server on `127.0.0.1:0` serving `pages` (path, content type, body); any
    /// other path is a 404.
    pub async fn start(pages: &[(&str, &str, &str)]) -> PageServer {
        let site = Arc::new(Mutex::new(Site {
            pages: pages
                .iter()
                .map(|(path, kind, body)| {
                    ((*path).to_owned(), ((*kind).to_owned(), (*body).to_owned()))
                })
                .collect(),
            requests: Vec::new(),
        }));
        let app = axum::Router::new().fallback(serve).with_state(site.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("PageServer: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("PageServer: local_addr");
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        PageServer { addr, site, server }
    }

    /// `http://<host>:<port><path>`: `host` names this server (`127.0.0.1`, `localhost`).
    pub fn url(&self, host: &str, path: &str) -> String {
        format!("http://{host}:{}{path}", self.addr.port())
    }

    /// The paths requested, in order.
    pub fn requests(&self) -> Vec<String> {
        self.site
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .requests
            .clone()
    }
}

async fn serve(State(site): State<Arc<Mutex<Site>>>, uri: Uri) -> Response {
    let mut site = site.lock().unwrap_or_else(|e| e.into_inner());
    site.requests.push(uri.path().to_owned());
    match site.pages.get(uri.path()) {
        Some((kind, body)) => {
            ([(header::CONTENT_TYPE, kind.clone())], body.clone()).into_response()
        }
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}
