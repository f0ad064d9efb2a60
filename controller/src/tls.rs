//! One process-wide TLS provider (ring) for both HTTP stacks: reqwest (the model gateway,
//! web fetches) and Slack's hyper client. Every client constructor calls [`ensure_provider`]
//! first, so no code path can build a client before a provider exists.

/// Installs the ring provider unless one is installed already.
pub fn ensure_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
