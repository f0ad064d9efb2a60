//! Web fetches on a runner's behalf (the runner has no network). The policy: http and https
//! only; hosts on the deny list refused, and when an allow list is set only hosts on it;
//! addresses that resolve to loopback, private, link-local or otherwise internal networks
//! refused (a runner must not reach the controller's own network) unless the host is named
//! in `fetch.allowInternalHosts` (off by default; tests use it for a local server), checked
//! again when the connection is made so a name cannot answer differently the second time
//! (DNS rebinding); redirects not followed
//! (the answer says where they point); the body cut at a size cap.
//!
//! A URL's host is a name or an IP literal (`http://[2606:4700::1111]/`, `http://10.0.0.1/`):
//! a name is resolved, a literal is the address itself and is checked as such (IPv6 ones
//! too, including IPv4 addresses embedded in them), never handed to the resolver.
//!
//! Only bytes cross here: the controller never parses a fetched page (the runner turns HTML
//! into text, inside its sandbox), so no page can tie it up.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use codebutler_proto::runner::v1::FetchResponse;
use tonic::Status;

/// Largest body returned, whatever the runner asks.
pub const MAX_FETCH_BYTES: u64 = 2 * 1024 * 1024;

/// What a runner may fetch.
#[derive(Debug, Clone)]
pub struct FetchPolicy {
    /// Host suffixes allowed (empty: any public host).
    pub allow: Vec<String>,
    /// Host suffixes refused.
    pub deny: Vec<String>,
    /// Hosts (exact, lower-case) allowed to resolve to internal addresses; empty by default.
    pub allow_internal: Vec<String>,
    pub http: reqwest::Client,
    /// The same client without the 30-second cap on a whole exchange (connecting is still
    /// capped), for the remote MCP servers' streamed answers ([`super::mcp`]), which bound
    /// their calls themselves.
    pub streaming_http: reqwest::Client,
}

/// Why the HTTP client of fetches could not be built.
#[derive(Debug, thiserror::Error)]
#[error("build the web fetch client: {0}")]
pub struct FetchClientError(#[from] reqwest::Error);

/// The policy the configuration's `fetch` section sets (`allow`, `deny`,
/// `allowInternalHosts`): the Coder's fetches, its remote MCP servers' and the researcher's.
pub fn policy(config: &crate::config::Config) -> Result<FetchPolicy, FetchClientError> {
    FetchPolicy::new(config.fetch.allow.clone(), config.fetch.deny.clone())?
        .allowing_internal_hosts(config.fetch.allow_internal_hosts.clone())
}

impl FetchPolicy {
    /// A policy with the given host lists.
    pub fn new(allow: Vec<String>, deny: Vec<String>) -> Result<Self, FetchClientError> {
        Ok(Self {
            allow,
            deny,
            allow_internal: Vec::new(),
            http: client(Vec::new(), Some(FETCH_TIMEOUT))?,
            streaming_http: client(Vec::new(), None)?,
        })
    }

    /// Lets the named hosts (exact names or IP literals, IPv6 with or without brackets)
    /// resolve to internal addresses. They still pass the allow and deny lists.
    pub fn allowing_internal_hosts(mut self, hosts: Vec<String>) -> Result<Self, FetchClientError> {
        self.allow_internal = hosts
            .iter()
            .map(|h| normalize_host(h))
            .filter(|h| !h.is_empty())
            .collect();
        self.http = client(self.allow_internal.clone(), Some(FETCH_TIMEOUT))?;
        self.streaming_http = client(self.allow_internal.clone(), None)?;
        Ok(self)
    }

    /// Checks a URL's scheme and host name against the lists.
    pub fn check_url(&self, url: &str) -> Result<reqwest::Url, Status> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| Status::invalid_argument(format!("not a URL ({e})")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Status::permission_denied(
                "only http and https URLs are fetched",
            ));
        }
        let host = Host::of(&parsed)?;
        let matches = |entry: &String| host.matches(entry);
        if self.deny.iter().any(matches) {
            return Err(Status::permission_denied(format!(
                "{host} is on the fetch deny list"
            )));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(matches) {
            return Err(Status::permission_denied(format!(
                "{host} is not on the fetch allow list"
            )));
        }
        Ok(parsed)
    }

    /// The addresses `parsed` (checked by [`FetchPolicy::check_url`]) leads to, once they
    /// pass the internal-address rule: an IP literal is its own address, a name is resolved.
    pub async fn checked_addresses(&self, parsed: &reqwest::Url) -> Result<Vec<IpAddr>, Status> {
        let host = Host::of(parsed)?;
        let addrs = match &host {
            Host::Ip(ip) => vec![*ip],
            Host::Name(name) => {
                let port = parsed.port_or_known_default().unwrap_or(80);
                tokio::net::lookup_host((name.as_str(), port))
                    .await
                    .map_err(|e| Status::unavailable(format!("resolve {host}: {e}")))?
                    .map(|a| a.ip())
                    .collect()
            }
        };
        let internal_allowed = self.allow_internal.contains(&host.to_string());
        if addrs.is_empty() || (!internal_allowed && addrs.iter().any(|ip| !is_public(ip))) {
            let what = match host {
                Host::Ip(_) => "is",
                Host::Name(_) => "resolves to",
            };
            return Err(Status::permission_denied(format!(
                "{host} {what} an internal address; only public hosts are fetched"
            )));
        }
        Ok(addrs)
    }

    /// Fetches `url` under the policy.
    pub async fn fetch(&self, url: &str, max_bytes: u64) -> Result<FetchResponse, Status> {
        let parsed = self.check_url(url)?;
        let host = Host::of(&parsed)?;
        self.checked_addresses(&parsed).await?;
        let cap = max_bytes.clamp(1, MAX_FETCH_BYTES);
        let mut response = self
            .http
            .get(parsed.clone())
            .send()
            .await
            .map_err(|e| Status::unavailable(format!("fetch {host}: {}", e.without_url())))?;
        let status = u32::from(response.status().as_u16());
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| Status::unavailable(format!("read {host}: {}", e.without_url())))?
        {
            let room = usize::try_from(cap)
                .unwrap_or(usize::MAX)
                .saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(FetchResponse {
            status,
            content_type,
            body,
            truncated,
            final_url: parsed.to_string(),
        })
    }
}

/// A URL's host: a name (lower-case) or an IP literal.
#[derive(Debug, Clone, PartialEq)]
enum Host {
    Name(String),
    Ip(IpAddr),
}

impl Host {
    /// The host of `url`; IPv6 literals lose their brackets, IPv4 ones are in the URL
    /// parser's canonical form already (`http://127.1/` is `127.0.0.1`).
    fn of(url: &reqwest::Url) -> Result<Self, Status> {
        let host = url
            .host_str()
            .ok_or_else(|| Status::invalid_argument("the URL has no host"))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        Ok(match bare.parse::<IpAddr>() {
            Ok(ip) => Self::Ip(ip),
            Err(_) => Self::Name(host.to_lowercase()),
        })
    }

    /// Whether a list entry names this host: a name by suffix (`example.com` covers
    /// `docs.example.com`), an address exactly.
    fn matches(&self, entry: &str) -> bool {
        let entry = normalize_host(entry.trim().trim_start_matches('.'));
        match self {
            Self::Name(name) => *name == entry || name.ends_with(&format!(".{entry}")),
            Self::Ip(ip) => ip.to_string() == entry,
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(name) => f.write_str(name),
            Self::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A host as configured: lower-case, an IP literal in canonical form without brackets.
fn normalize_host(host: &str) -> String {
    let bare = host.trim().trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => bare.to_lowercase(),
    }
}

/// Longest a fetch may take, from connecting to the body's last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP client of fetches: no redirects, `timeout` on a whole exchange when given (a
/// connection always within [`FETCH_TIMEOUT`]), and name resolution through
/// [`PublicResolver`], so the address connected to is one the policy checked.
fn client(
    allow_internal: Vec<String>,
    timeout: Option<Duration>,
) -> Result<reqwest::Client, FetchClientError> {
    crate::tls::ensure_provider();
    let builder = match timeout {
        Some(timeout) => reqwest::Client::builder().timeout(timeout),
        None => reqwest::Client::builder(),
    };
    builder
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(FETCH_TIMEOUT)
        .user_agent(concat!("codebutler/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(Arc::new(PublicResolver { allow_internal }))
        .build()
        .map_err(FetchClientError)
}

/// Resolves host names for fetches and returns only public addresses (all addresses for
/// the hosts in `allow_internal`). [`FetchPolicy::fetch`] checks the name first to give a
/// clear refusal; resolving again here, at connect time, closes DNS rebinding — a name that
/// answered with a public address for the check and an internal one for the connection.
struct PublicResolver {
    allow_internal: Vec<String>,
}

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_lowercase();
        let internal_allowed = self.allow_internal.contains(&host);
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| internal_allowed || is_public(&a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host} has no public address").into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// Whether an address is on the public internet. IPv6 addresses that carry an IPv4
/// address (mapped, compatible, NAT64, 6to4) are as public as the address they carry.
pub fn is_public(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => is_public_v4(&v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(v4: &Ipv4Addr) -> bool {
    let o = v4.octets();
    !(v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (64..128).contains(&o[1]))
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
        || o[0] >= 240)
}

fn is_public_v6(v6: &Ipv6Addr) -> bool {
    let s = v6.segments();
    !(v6.is_loopback()
        || v6.is_unspecified()
        || v6.is_multicast()
        // unique local fc00::/7, link-local fe80::/10, site-local fec0::/10
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        // local-use NAT64 64:ff9b:1::/48, discard-only 100::/64
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1)
        || (s[0] == 0x100 && s[1..4] == [0, 0, 0])
        // Teredo 2001::/32, benchmarking 2001:2::/48, ORCHID 2001:10::/28 and 2001:20::/28,
        // documentation 2001:db8::/32 and 3fff::/20
        || (s[0] == 0x2001 && (s[1] == 0 || s[1] == 2 || (0x10..=0x2f).contains(&s[1]) || s[1] == 0xdb8))
        || (s[0] & 0xfff0) == 0x3ff0)
}

/// The IPv4 address an IPv6 address carries: IPv4-mapped (`::ffff:a.b.c.d`),
/// IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(v6: &Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let low = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if s[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified() {
        return Some(low(s[6], s[7]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(low(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(low(s[1], s[2]));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fc00::1",
            "fe80::1",
            "fec0::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::169.254.169.254",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "2001:db8::1",
            "2001::1",
            "100::1",
            "192.0.0.1",
        ] {
            assert!(!is_public(&ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "2606:4700::1111",
            "::ffff:93.184.216.34",
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
        ] {
            assert!(is_public(&ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn ip_literals_are_their_own_addresses() {
        let open = FetchPolicy::new(vec![], vec![]).unwrap();
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        for (u, ip) in [
            ("http://[2606:4700::1111]/", "2606:4700::1111"),
            ("https://[2606:4700:0:0::1111]:8443/x", "2606:4700::1111"),
            ("http://1.1.1.1/", "1.1.1.1"),
            ("http://16843009/", "1.1.1.1"),
        ] {
            let addrs = open.checked_addresses(&url(u)).await.unwrap();
            assert_eq!(addrs, vec![ip.parse::<IpAddr>().unwrap()], "{u}");
        }
        for u in [
            "http://[::1]:9/",
            "http://[fe80::1]/",
            "http://[fc00::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::]/",
            "http://[64:ff9b::7f00:1]/",
            "http://127.1/",
            "http://0x7f.0.0.1/",
        ] {
            let err = open.fetch(u, 100).await.unwrap_err();
            assert_eq!(err.code(), tonic::Code::PermissionDenied, "{u}: {err}");
            assert!(
                err.message().contains("is an internal address"),
                "{u}: {err}"
            );
        }
        // Lists name addresses exactly, with or without brackets.
        let denied = FetchPolicy::new(vec![], vec!["[2606:4700::1111]".into()]).unwrap();
        let err = denied.check_url("http://[2606:4700:0::1111]/").unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err}");
        assert!(denied.check_url("http://[2606:4700::1112]/").is_ok());
    }

    #[tokio::test]
    async fn an_allowed_internal_ipv6_literal_is_fetched() {
        let listener = tokio::net::TcpListener::bind("[::1]:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0, "request ended early");
                request.extend_from_slice(&buf[..n]);
            }
            socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello")
                .await
                .unwrap();
            String::from_utf8(request).unwrap()
        });
        let url = format!("http://[::1]:{port}/page");
        let strict = FetchPolicy::new(vec![], vec![]).unwrap();
        let err = strict.fetch(&url, 100).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err}");
        let local = FetchPolicy::new(vec![], vec![])
            .unwrap()
            .allowing_internal_hosts(vec!["[::1]".into()])
            .unwrap();
        let page = local.fetch(&url, 100).await.unwrap();
        assert_eq!((page.status, page.body.as_slice()), (200, &b"hello"[..]));
        assert_eq!(page.final_url, url);
        let request = server.await.unwrap();
        assert!(request.starts_with("GET /page HTTP/1.1\r\n"), "{request}");
        assert!(
            request
                .to_lowercase()
                .contains(&format!("host: [::1]:{port}\r\n")),
            "{request}"
        );
    }

    #[tokio::test]
    async fn connections_resolve_only_to_checked_addresses() {
        use reqwest::dns::Resolve;
        let name = |host: &str| host.parse::<reqwest::dns::Name>().unwrap();
        // A name that resolves to loopback (as a rebinding name would, the second time).
        let strict = PublicResolver {
            allow_internal: vec![],
        };
        let refused = strict.resolve(name("localhost")).await;
        assert!(
            refused.is_err_and(|e| e.to_string().contains("no public address")),
            "localhost must not be connected to"
        );
        let lenient = PublicResolver {
            allow_internal: vec!["localhost".into()],
        };
        let addrs: Vec<SocketAddr> = lenient
            .resolve(name("localhost"))
            .await
            .map_err(|e| e.to_string())
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
        assert!(!addrs.is_empty());
    }

    #[tokio::test]
    async fn policy_checks_scheme_lists_and_addresses() {
        let open = FetchPolicy::new(vec![], vec!["evil.example".into()]).unwrap();
        assert!(open.check_url("https://docs.rs/x").is_ok());
        assert_eq!(
            open.check_url("file:///etc/passwd").unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        assert_eq!(
            open.check_url("https://api.evil.example/")
                .unwrap_err()
                .code(),
            tonic::Code::PermissionDenied
        );
        let err = open.fetch("http://127.0.0.1:9/", 100).await.unwrap_err();
        assert!(err.message().contains("internal address"), "{err}");
        let err = open.fetch("http://localhost:9/", 100).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        // Internal addresses only for hosts named explicitly, and still under the lists.
        let local = FetchPolicy::new(vec![], vec![])
            .unwrap()
            .allowing_internal_hosts(vec!["127.0.0.1".into()])
            .unwrap();
        let err = local.fetch("http://localhost:9/", 100).await.unwrap_err();
        assert!(err.message().contains("internal address"), "{err}");
        let err = local.fetch("http://127.0.0.1:9/", 100).await.unwrap_err();
        assert_eq!(
            err.code(),
            tonic::Code::Unavailable,
            "allowed, nothing listens: {err}"
        );
        let denied = FetchPolicy::new(vec![], vec!["127.0.0.1".into()])
            .unwrap()
            .allowing_internal_hosts(vec!["127.0.0.1".into()])
            .unwrap();
        let err = denied.fetch("http://127.0.0.1:9/", 100).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        let allow = FetchPolicy::new(vec!["docs.rs".into()], vec![]).unwrap();
        assert!(allow.check_url("https://docs.rs/tokio").is_ok());
        assert!(allow.check_url("https://crates.io/").is_err());
    }
}
