//! The admin HTTP API (`[admin]`, off by default): health, readiness, Prometheus metrics, sessions and a way
//! to talk to the agent from scripts.
//!
//! - `GET /healthz`: the process is alive. `GET /readyz`: every enabled channel is connected and the session
//!   store is writable (503 with the reasons otherwise). These two need no token, so probes can use them.
//! - `GET /metrics`: see [`crate::metrics`].
//! - `GET /sessions`, `GET /sessions/{key}` (the history the model would see), `POST /sessions/{key}/clear`
//!   (`/new`: memory first, then the transcript is archived), `POST /messages` (`{"session": id, "text": …}`
//!   → the reply, on session `api:<id>`).
//!
//! Every route but the two probes requires `Authorization: Bearer <admin.token>`; the API refuses to start
//! without a token. Keys in paths are percent-decoded and validated; bad input gets 400 with the reason, as
//! JSON `{"error": …}`. Bodies are read with nanogate's own JSON codec (no serde_json).

mod routes;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::agent::Router;
use crate::config::{AdminConfig, ConfigError};

/// Why the admin API did not start.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// No token, or another unusable setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `admin.listen` is not an address.
    #[error("admin.listen {0:?} is not an address like 127.0.0.1:18790")]
    Listen(String),
    /// The address is taken or not allowed.
    #[error("cannot listen on {addr}: {source} (is another nanogate running? change admin.listen)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The operating system's reason.
        source: std::io::Error,
    },
}

/// Which channels are connected, as the channels report it; read by `/readyz`.
#[derive(Debug, Default)]
pub struct Readiness {
    channels: Mutex<BTreeMap<String, bool>>,
}

impl Readiness {
    /// Records whether `channel` is connected now. A channel that never reported counts as not connected once
    /// it is [`Readiness::register`]ed.
    pub fn set(&self, channel: &str, connected: bool) {
        self.channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(channel.to_owned(), connected);
    }

    /// Registers an enabled channel (not connected yet).
    pub fn register(&self, channel: &str) {
        self.channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(channel.to_owned())
            .or_insert(false);
    }

    /// Every registered channel with its state.
    pub fn channels(&self) -> BTreeMap<String, bool> {
        self.channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What the handlers work with.
#[derive(Clone)]
pub struct AdminState {
    /// The router (and through it the agent, its store and memory).
    pub router: Router,
    /// Channel connection states.
    pub readiness: Arc<Readiness>,
    token: Arc<str>,
}

/// Starts the API on `config.listen`; it runs until `stop` is cancelled.
pub async fn start(
    config: &AdminConfig,
    router: Router,
    readiness: Arc<Readiness>,
    stop: CancellationToken,
) -> Result<(SocketAddr, JoinHandle<()>), AdminError> {
    let token: Arc<str> = config.resolve_token()?.into();
    let addr: SocketAddr = config
        .listen
        .parse()
        .map_err(|_| AdminError::Listen(config.listen.clone()))?;
    if !addr.ip().is_loopback() {
        warn!(%addr, "the admin API listens beyond this machine over plain HTTP; put TLS in front of it");
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| AdminError::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    let app = routes::app(AdminState {
        router,
        readiness,
        token,
    });
    info!(addr = %bound, "admin API listening");
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            warn!("admin API stopped: {e}");
        }
    });
    Ok((bound, task))
}
