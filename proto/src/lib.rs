//! The gRPC contract between CodeButler's processes: the `.proto` files under `codebutler/`
//! and the tonic/prost code generated from them at build time. Nothing here is written by
//! hand; servers and clients live in the crates that use them.
//!
//! - [`runner::v1::runner_hub_server::RunnerHub`]: served by the controller to one sandboxed
//!   runner per connection. On one bidirectional stream (`Session`) the runner sends its
//!   events and receives its task and commands; it makes every model call through the
//!   controller's gateway (`Complete`) and every web fetch through the controller's policy
//!   (`Fetch`). The controller knows a runner by the
//!   connection it came in on, so no message carries a thread id, token or other secret.
//! - [`runner::v1::admin_server::Admin`]: served by the controller on
//!   `<repo>/.codebutler/run/admin.sock` for `runnerctl` (list, show, follow, cancel and
//!   start runs).
//!
//! Package names are versioned (`codebutler.runner.v1`): a breaking change becomes `v2`
//! beside `v1`, and field numbers within a version never change meaning.
//!
//! Both services run over Unix domain sockets, not TCP: the runner has no network at all
//! (its network namespace has only loopback), and a socket file or an inherited socket
//! descriptor is reachable only by whoever the file permissions or the descriptor allow —
//! with the peer's uid and pid available to the server — instead of by anything that can
//! open a port on the host.

/// Generated code of the `codebutler.runner.v1` package (`runner.proto` and `admin.proto`).
pub mod runner {
    /// Version 1 of the runner and admin protocols.
    pub mod v1 {
        tonic::include_proto!("codebutler.runner.v1");
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::runner::v1::{
        CompleteChunk, FinishReason, Finished, RunnerEvent, ToolCallDelta, admin_client,
        admin_server, complete_chunk, runner_event, runner_hub_client, runner_hub_server,
    };

    #[test]
    fn runner_event_round_trips() {
        let event = RunnerEvent {
            event: Some(runner_event::Event::Finished(Finished {
                reason: FinishReason::MaxTurns.into(),
                summary: "stopped after 40 turns".to_owned(),
            })),
        };
        let bytes = event.encode_to_vec();
        let decoded = RunnerEvent::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded, event);
        let Some(runner_event::Event::Finished(finished)) = decoded.event else {
            panic!("wrong variant: {decoded:?}");
        };
        assert_eq!(finished.reason(), FinishReason::MaxTurns);
    }

    #[test]
    fn complete_chunk_round_trips() {
        let chunk = CompleteChunk {
            chunk: Some(complete_chunk::Chunk::ToolCallDelta(ToolCallDelta {
                index: 1,
                id: "call_1".to_owned(),
                name: "Read".to_owned(),
                arguments: r#"{"file_path":"#.to_owned(),
            })),
        };
        let decoded = CompleteChunk::decode(chunk.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded, chunk);

        let refusal = CompleteChunk {
            chunk: Some(complete_chunk::Chunk::Refusal(super::runner::v1::Refusal {
                reason: "budget reached".to_owned(),
            })),
        };
        let decoded = CompleteChunk::decode(refusal.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded, refusal);
    }

    /// The services, their server wrappers and their clients exist with these names; the
    /// functions are never called, they only have to compile.
    #[allow(dead_code)]
    mod services_exist {
        use super::{admin_client, admin_server, runner_hub_client, runner_hub_server};

        fn runner_hub<T: runner_hub_server::RunnerHub>(
            service: T,
        ) -> runner_hub_server::RunnerHubServer<T> {
            runner_hub_server::RunnerHubServer::new(service)
        }

        fn admin<T: admin_server::Admin>(service: T) -> admin_server::AdminServer<T> {
            admin_server::AdminServer::new(service)
        }

        type RunnerHubClient = runner_hub_client::RunnerHubClient<tonic::transport::Channel>;
        type AdminClient = admin_client::AdminClient<tonic::transport::Channel>;
    }
}
