//! Who may read the dashboard: with `dashboard.token` set, a request shows it as
//! `Authorization: Bearer <token>` (a scraper, a script), or in the cookie a browser got by
//! opening a page once with `?token=<token>`. That first load answers with the cookie
//! (HttpOnly, so no script reads it; SameSite=Strict, so no other site's page sends it) and
//! a redirect to the same page without the token, which so leaves the address bar and the
//! history. The cookie holds the token's SHA-256, not the token. Every comparison takes the
//! same time whatever the bytes, so timing tells nothing about how much of a guess was
//! right. Without a token (loopback only: the configuration refuses anything else) a
//! request passes when its `Host` is a loopback name or address: a web page whose own name
//! an attacker pointed at 127.0.0.1 (DNS rebinding) sends its own name and is refused.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, COOKIE, HOST, LOCATION, SET_COOKIE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::secret::Secret;

/// The cookie's name.
pub const COOKIE_NAME: &str = "codebutler_dashboard";

/// The token's check: the token and its cookie value.
pub struct Gate {
    token: Option<Secret>,
    /// The hex SHA-256 of the token: the cookie's value.
    cookie: String,
}

/// Shows whether a token is set, never the token or its cookie (which opens the pages as
/// well as the token does).
impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate asking for `token`; `None` lets every request through.
    pub fn new(token: Option<Secret>) -> Self {
        let cookie = token
            .as_ref()
            .map(|t| hex(&Sha256::digest(t.expose().as_bytes())))
            .unwrap_or_default();
        Self { token, cookie }
    }

    /// Whether `headers` show the token (a bearer header or the cookie); without a token,
    /// whether they name a loopback host.
    fn shown_in(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return loopback_host(headers);
        };
        let bearer = headers
            .get_all(AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.strip_prefix("Bearer "))
            .any(|given| same(given.trim(), token.expose()));
        bearer
            || headers
                .get_all(COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(';'))
                .filter_map(|pair| pair.trim().strip_prefix(COOKIE_NAME))
                .filter_map(|rest| rest.strip_prefix('='))
                .any(|given| same(given, &self.cookie))
    }

    /// Whether the address's `?token=` is the token.
    fn in_query(&self, uri: &Uri) -> bool {
        let Some(token) = &self.token else {
            return false;
        };
        let Some(query) = uri.query() else {
            return false;
        };
        let Some(pairs) = query_pairs(query) else {
            return false;
        };
        pairs
            .iter()
            .any(|(k, v)| k == "token" && same(v, token.expose()))
    }
}

/// Whether the request's `Host` is `localhost`, a loopback address (`127.0.0.0/8`, `[::1]`),
/// with or without a port.
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The query's pairs, decoded; `None` when it does not decode.
fn query_pairs(query: &str) -> Option<Vec<(String, String)>> {
    let uri = format!("/?{query}").parse::<Uri>().ok()?;
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .ok()
        .map(|q| q.0)
}

/// `a == b`, in a time that depends on their lengths only.
fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The middleware: the request goes on when it shows the token; a first load with
/// `?token=` gets the cookie and a redirect; anything else a 401.
pub async fn require_token(
    State(gate): State<Arc<Gate>>,
    request: Request,
    next: Next,
) -> Response {
    if gate.shown_in(request.headers()) {
        return next.run(request).await;
    }
    if gate.in_query(request.uri()) {
        let cookie = format!(
            "{COOKIE_NAME}={}; HttpOnly; SameSite=Strict; Path=/",
            gate.cookie
        );
        return (
            StatusCode::SEE_OTHER,
            [
                (LOCATION, request.uri().path().to_owned()),
                (SET_COOKIE, cookie),
            ],
        )
            .into_response();
    }
    (
        StatusCode::UNAUTHORIZED,
        [(WWW_AUTHENTICATE, "Bearer")],
        "this dashboard needs its token: send `Authorization: Bearer <token>`, or open a page \
         once with ?token=<token>\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const TOKEN: &str = "a-long-dashboard-token-0123";

    fn headers(name: axum::http::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn the_token_is_shown_by_bearer_cookie_or_first_query() {
        let gate = Gate::new(Some(Secret::new(TOKEN)));
        assert!(gate.shown_in(&headers(AUTHORIZATION, &format!("Bearer {TOKEN}"))));
        assert!(!gate.shown_in(&headers(
            AUTHORIZATION,
            "Bearer a-long-dashboard-token-0124"
        )));
        assert!(!gate.shown_in(&HeaderMap::new()));
        let cookie = format!("other=1; {COOKIE_NAME}={}", gate.cookie);
        assert!(gate.shown_in(&headers(COOKIE, &cookie)));
        // The cookie holds the token's digest: the token itself as the cookie is refused.
        assert!(!gate.shown_in(&headers(COOKIE, &format!("{COOKIE_NAME}={TOKEN}"))));
        assert!(gate.in_query(&format!("/runs?token={TOKEN}").parse().unwrap()));
        assert!(!gate.in_query(&"/runs?token=nope".parse().unwrap()));
        assert!(!gate.in_query(&"/runs".parse().unwrap()));
    }

    #[test]
    fn debug_shows_neither_the_token_nor_its_cookie() {
        let gate = Gate::new(Some(Secret::new(TOKEN)));
        let shown = format!("{gate:?}");
        assert!(!shown.contains(TOKEN), "{shown}");
        assert!(!shown.contains(&gate.cookie), "{shown}");
    }

    #[test]
    fn without_a_token_only_loopback_hosts_pass() {
        let gate = Gate::new(None);
        for host in [
            "127.0.0.1:8741",
            "localhost:8741",
            "LOCALHOST",
            "[::1]:8741",
            "127.1.2.3",
        ] {
            assert!(gate.shown_in(&headers(HOST, host)), "{host}");
        }
        // A rebound name, a LAN address, a name that only starts like one, no Host at all.
        for host in [
            "evil.example:8741",
            "192.168.1.5:8741",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
        ] {
            assert!(!gate.shown_in(&headers(HOST, host)), "{host}");
        }
        assert!(!gate.shown_in(&HeaderMap::new()));
    }
}
