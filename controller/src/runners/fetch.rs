//! Web fetches on a runner's behalf (the runner has no network). The policy: http and https
//! only; hosts on the deny list refused, and when an allow list is set only hosts on it;
//! addresses that resolve to loopback, private, link-local or otherwise internal networks
//! refused (a runner must not reach the controller's own network) unless the host is named
//! in `fetch.allowInternalHosts` (off by default; tests use it for a local server), checked
//! again when the connection is made so a name cannot answer differently the second time
//! (DNS rebinding); redirects not followed
//! (the answer says where they point); the body cut at a size cap.

use std::net::{IpAddr, SocketAddr};
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
}

impl FetchPolicy {
    /// A policy with the given host lists.
    pub fn new(allow: Vec<String>, deny: Vec<String>) -> Result<Self, String> {
        Ok(Self {
            allow,
            deny,
            allow_internal: Vec::new(),
            http: client(Vec::new())?,
        })
    }

    /// Lets the named hosts (exact names or IP literals) resolve to internal addresses.
    /// They still pass the allow and deny lists.
    pub fn allowing_internal_hosts(mut self, hosts: Vec<String>) -> Result<Self, String> {
        self.allow_internal = hosts
            .into_iter()
            .map(|h| h.trim().trim_matches(['[', ']']).to_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        self.http = client(self.allow_internal.clone())?;
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
        let host = parsed
            .host_str()
            .ok_or_else(|| Status::invalid_argument("the URL has no host"))?
            .to_lowercase();
        let matches = |suffix: &String| {
            let suffix = suffix.trim_start_matches('.').to_lowercase();
            host == suffix || host.ends_with(&format!(".{suffix}"))
        };
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

    /// Fetches `url` under the policy.
    pub async fn fetch(&self, url: &str, max_bytes: u64) -> Result<FetchResponse, Status> {
        let parsed = self.check_url(url)?;
        let host = parsed.host_str().unwrap_or_default().to_owned();
        let port = parsed.port_or_known_default().unwrap_or(80);
        let addrs: Vec<IpAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| Status::unavailable(format!("resolve {host}: {e}")))?
            .map(|a| a.ip())
            .collect();
        let internal_allowed = self
            .allow_internal
            .iter()
            .any(|h| *h == host.trim_matches(['[', ']']).to_lowercase());
        if addrs.is_empty() || (!internal_allowed && addrs.iter().any(|ip| !is_public(ip))) {
            return Err(Status::permission_denied(format!(
                "{host} resolves to an internal address; only public hosts are fetched"
            )));
        }
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

/// The HTTP client of fetches: no redirects, a timeout, and name resolution through
/// [`PublicResolver`], so the address connected to is one the policy checked.
fn client(allow_internal: Vec<String>) -> Result<reqwest::Client, String> {
    crate::tls::ensure_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("codebutler/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(Arc::new(PublicResolver { allow_internal }))
        .build()
        .map_err(|e| e.to_string())
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

/// Whether an address is on the public internet.
pub fn is_public(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
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
                || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(&IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80)
        }
    }
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
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(&ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1"] {
            assert!(is_public(&ip.parse().unwrap()), "{ip}");
        }
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
