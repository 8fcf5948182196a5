//! The access log (`[access_log]`): one line per request, written off the
//! request path. A request's handler fills an [`Outcome`] (route, tier,
//! decision) as it goes; [`AccessLog::follow`] wraps the response body to
//! count the bytes sent, and when the body ends (or is dropped: the client
//! went away) the line's [`Record`] goes into a bounded channel (a
//! WebSocket's when its tunnel ends, with the bytes the tunnel sent), which a
//! writer thread of its own empties every [`WRITE_INTERVAL`]. A request
//! never waits for the log: a record finding the channel full is dropped and
//! counted (`tollgate_access_log_dropped_total`); sending takes no lock and
//! makes no system call (the writer polls instead of being woken). The key is
//! never written, only its fingerprint (the writer makes it: HMAC-SHA-256
//! under the key secret, 16 hex digits), nor the query string (whose values may be secrets: tokens, signatures, keys).
//! The fields are documented in `docs/CONFIG.md`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant, SystemTime};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::Method;
use http_body::{Body as HttpBody, Frame, SizeHint};

use tollgate_core::{Clock, Fingerprinter};

use crate::config::{AccessLogConfig, AccessLogFormat};
use crate::proxy::upgrade::TunnelLog;
use crate::serve::error::StartError;

mod line;
mod outcome;

use line::{Line, text_line};
pub(crate) use outcome::{Admission, Outcome};

/// How often the writer thread writes what the channel holds.
pub(crate) const WRITE_INTERVAL: Duration = Duration::from_millis(20);

/// Access log lines dropped because the writer's channel was full.
pub(crate) const DROPPED: &str = "tollgate_access_log_dropped_total";

/// Marks a response tollgate made itself (a problem+json answer), so that a
/// forwarded request's 502 or 504 is not taken for its upstream's status.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnAnswer;

/// What is known of a request as it arrives.
#[derive(Debug)]
pub(crate) struct Arrival {
    time: SystemTime,
    started: Instant,
    /// `None` for a request the HTTP parser rejected.
    method: Option<Method>,
    /// The path as the client sent it, without the query; `None` for a
    /// request the HTTP parser rejected.
    path: Option<String>,
}

impl Arrival {
    /// The arrival of `request` at `time`.
    pub(crate) fn of<B>(request: &http::Request<B>, time: SystemTime) -> Self {
        Arrival {
            time,
            started: Instant::now(),
            method: Some(request.method().clone()),
            path: Some(request.uri().path().to_owned()),
        }
    }

    /// A request the HTTP parser rejected at `time`: its method and path
    /// are not known.
    fn unread(time: SystemTime) -> Self {
        Arrival {
            time,
            started: Instant::now(),
            method: None,
            path: None,
        }
    }
}

/// What the writer is sent: a line, or word to reopen its file (in the
/// channel, so the lines sent before it go to the old file, and those after
/// to the new one).
#[derive(Debug)]
enum Message {
    Line(Box<Record>),
    Reopen,
}

/// One line's content.
#[derive(Debug)]
struct Record {
    arrival: Arrival,
    status: u16,
    outcome: Outcome,
    upstream_status: Option<u16>,
    duration: Duration,
    bytes: u64,
}

/// The access log in force: the sending end of the writer's channel.
#[derive(Clone, Debug)]
pub(crate) struct AccessLog {
    shared: Arc<Shared>,
}

struct Shared {
    sender: SyncSender<Message>,
    /// The gateway's clock, which decides its limits: each line's `time`
    /// is read from it, so a replay of the log decides at the same times.
    clock: Arc<dyn Clock>,
    /// Set at shutdown: the writer writes what is left and ends.
    stop: Arc<AtomicBool>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl AccessLog {
    /// Starts the writer `config` describes; `None` when the log is off.
    ///
    /// # Errors
    ///
    /// [`StartError::AccessLog`] when the file cannot be opened for
    /// appending, [`StartError::Start`] when the thread cannot start.
    pub(crate) fn start(
        config: &AccessLogConfig,
        fingerprints: Fingerprinter,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<AccessLog>, StartError> {
        if !config.enabled {
            return Ok(None);
        }
        let output = Output::open(config.path.as_deref())?;
        let (sender, receiver) = sync_channel(config.buffer_lines);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = Writer {
            receiver,
            output,
            format: config.format,
            fingerprints,
            stop: Arc::clone(&stop),
            line: Vec::new(),
            failing: false,
        };
        let thread = std::thread::Builder::new()
            .name("tollgate-access-log".to_owned())
            .spawn(move || writer.run())
            .map_err(|source| StartError::Start {
                what: "the access log's writer thread",
                source,
            })?;
        metrics::counter!(DROPPED).absolute(0);
        Ok(Some(AccessLog {
            shared: Arc::new(Shared {
                sender,
                clock,
                stop,
                writer: Mutex::new(Some(thread)),
            }),
        }))
    }

    /// Has the writer reopen its file (SIGHUP, after logrotate moved it):
    /// the lines sent before go to the old file, those after to the new.
    /// Waits for room in the channel (a reload, not a request, calls it).
    pub(crate) fn reopen(&self) {
        let _ = self.shared.sender.send(Message::Reopen);
    }

    /// Writes what is left and stops the writer, waiting for it (at
    /// shutdown, once no request is in flight).
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        let thread = self
            .shared
            .writer
            .lock()
            .map(|mut writer| writer.take())
            .unwrap_or_default();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// `response` to the request that arrived as `arrival`, its body counted:
    /// the line is sent when the body ends or is dropped.
    pub(crate) fn follow(
        &self,
        arrival: Arrival,
        outcome: Outcome,
        response: Response,
    ) -> Response {
        let status = response.status().as_u16();
        let own = response.extensions().get::<OwnAnswer>().is_some();
        let upstream_status = (outcome.forwarded && !own).then_some(status);
        let pending = Pending {
            log: self.clone(),
            arrival,
            status,
            outcome,
            upstream_status,
        };
        if let Some(tunnel) = response.extensions().get::<TunnelLog>() {
            // A WebSocket: its line when the tunnel ends (or is cut off at
            // shutdown), with the bytes it sent to the client and the whole
            // session's duration.
            tunnel.set(Box::new(move |bytes| pending.send(bytes)));
            return response;
        }
        response.map(|body| {
            Body::new(Counted {
                body,
                bytes: 0,
                pending: Some(pending),
            })
        })
    }

    /// The line of a request that hyper's HTTP/1 parser rejected and answered
    /// itself with `status` (400, 414 or 431, and an empty body): no method,
    /// path, route or decision, its time when it was rejected, its duration
    /// 0.
    pub(crate) fn rejected(&self, status: u16) {
        self.send(Record {
            arrival: Arrival::unread(self.now()),
            status,
            outcome: Outcome::new(true),
            upstream_status: None,
            duration: Duration::ZERO,
            bytes: 0,
        });
    }

    /// The arrival of `request`, now on the gateway's clock.
    pub(crate) fn arrival<B>(&self, request: &http::Request<B>) -> Arrival {
        Arrival::of(request, self.now())
    }

    /// Now, on the gateway's clock.
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(self.shared.clock.now_nanos())
    }

    /// Hands `record` to the writer, or drops and counts it when the channel
    /// is full (then `false`).
    fn send(&self, record: Record) -> bool {
        match self.shared.sender.try_send(Message::Line(Box::new(record))) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => true,
            Err(TrySendError::Full(_)) => {
                metrics::counter!(DROPPED).increment(1);
                false
            }
        }
    }
}

/// A line waiting for its response body's end.
struct Pending {
    log: AccessLog,
    arrival: Arrival,
    status: u16,
    outcome: Outcome,
    upstream_status: Option<u16>,
}

/// A response body counting the bytes of its data frames; its line goes to
/// the writer when it ends, fails or is dropped, whichever comes first.
struct Counted {
    body: Body,
    bytes: u64,
    pending: Option<Pending>,
}

impl Pending {
    /// Hands the line to the writer: `bytes` sent, the duration until now.
    fn send(self, bytes: u64) {
        let duration = self.arrival.started.elapsed();
        self.log.send(Record {
            arrival: self.arrival,
            status: self.status,
            outcome: self.outcome,
            upstream_status: self.upstream_status,
            duration,
            bytes,
        });
    }
}

impl Counted {
    fn finish(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.send(self.bytes);
        }
    }
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let frame = ready!(Pin::new(&mut self.body).poll_frame(context));
        match &frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    self.bytes = self.bytes.saturating_add(data.len() as u64);
                }
                if self.body.is_end_stream() {
                    self.finish();
                }
            }
            Some(Err(_)) | None => self.finish(),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Where lines go.
enum Output {
    Stdout,
    File { path: PathBuf, file: File },
}

impl Output {
    fn open(path: Option<&Path>) -> Result<Output, StartError> {
        match path {
            None => Ok(Output::Stdout),
            Some(path) => Ok(Output::File {
                file: append_to(path).map_err(|source| StartError::AccessLog {
                    path: path.display().to_string(),
                    source,
                })?,
                path: path.to_owned(),
            }),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Stdout => {
                let mut stdout = std::io::stdout().lock();
                stdout.write_all(bytes)?;
                stdout.flush()
            }
            Output::File { file, .. } => file.write_all(bytes),
        }
    }

    /// Opens the file again at its path (a file moved away keeps what it
    /// has; a new one is created).
    fn reopen(&mut self) {
        if let Output::File { path, file } = self {
            match append_to(path) {
                Ok(reopened) => *file = reopened,
                Err(error) => tracing::warn!(
                    path = %path.display(), %error,
                    "cannot reopen the access log; writing on to the file open"
                ),
            }
        }
    }
}

fn append_to(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// The writer thread's state.
struct Writer {
    receiver: Receiver<Message>,
    output: Output,
    format: AccessLogFormat,
    /// Shows each line's API key as its fingerprint.
    fingerprints: Fingerprinter,
    stop: Arc<AtomicBool>,
    /// The lines of one round, written at once.
    line: Vec<u8>,
    /// Whether the last write failed (logged once until one succeeds).
    failing: bool,
}

impl Writer {
    fn run(mut self) {
        loop {
            // Read before emptying the channel: what was sent before the
            // stop is written.
            let stopping = self.stop.load(Ordering::Acquire);
            let ended = loop {
                match self.receiver.try_recv() {
                    Ok(Message::Line(record)) => self.format(&record),
                    Ok(Message::Reopen) => {
                        self.write();
                        self.output.reopen();
                    }
                    Err(TryRecvError::Empty) => break false,
                    Err(TryRecvError::Disconnected) => break true,
                }
            };
            self.write();
            if stopping || ended {
                return;
            }
            std::thread::sleep(WRITE_INTERVAL);
        }
    }

    fn format(&mut self, record: &Record) {
        match self.format {
            AccessLogFormat::Json => {
                let line = Line::of(record, &self.fingerprints);
                if serde_json::to_writer(&mut self.line, &line).is_ok() {
                    self.line.push(b'\n');
                }
            }
            AccessLogFormat::Text => {
                text_line(&mut self.line, &Line::of(record, &self.fingerprints));
            }
        }
    }

    fn write(&mut self) {
        if self.line.is_empty() {
            return;
        }
        match self.output.write_all(&self.line) {
            Ok(()) => self.failing = false,
            Err(error) => {
                if !self.failing {
                    tracing::warn!(%error, "cannot write the access log; its lines are lost");
                }
                self.failing = true;
            }
        }
        self.line.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_finding_the_channel_full_is_dropped_not_waited_for() {
        // A channel of 1 that no writer empties.
        let (sender, receiver) = sync_channel(1);
        let log = AccessLog {
            shared: Arc::new(Shared {
                sender,
                clock: Arc::new(tollgate_core::SystemClock::new()),
                stop: Arc::new(AtomicBool::new(false)),
                writer: Mutex::new(None),
            }),
        };
        let record = || Record {
            arrival: Arrival::of(&http::Request::new(()), SystemTime::now()),
            status: 200,
            outcome: Outcome::default(),
            upstream_status: None,
            duration: Duration::ZERO,
            bytes: 0,
        };
        assert!(log.send(record()));
        assert!(!log.send(record()));
        assert!(matches!(receiver.try_recv(), Ok(Message::Line(_))));
        assert!(matches!(receiver.try_recv(), Err(TryRecvError::Empty)));
    }
}
