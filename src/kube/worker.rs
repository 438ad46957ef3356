//! A thread that talks to the API server on a client of its own (a watch),
//! stopped by dropping its handle: at once, whatever it waits on.

use super::{CLIENT_STACK, Client, Closer};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;

/// What the thread checks between requests and waits: set once its
/// handle is dropped.
#[derive(Clone)]
pub(crate) struct Stop(Arc<AtomicBool>);

impl Stop {
    pub(crate) fn stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The handle. Dropping it stops the thread at once: the flag is set, a
/// wait to retry (`std::thread::park_timeout`) wakes, and the thread's
/// connection is shut down under the request or watch it may be blocked
/// on, so it holds no API-server connection a moment later and never
/// starts another request.
pub(crate) struct Worker {
    stop: Stop,
    thread: Thread,
    closer: Option<Closer>,
}

impl Worker {
    /// Starts `body` on a thread named `name` with `client`, the thread's own.
    pub(crate) fn spawn(
        name: &str,
        client: Client,
        body: impl FnOnce(Client, Stop) + Send + 'static,
    ) -> std::io::Result<Worker> {
        let stop = Stop(Arc::new(AtomicBool::new(false)));
        let closer = Some(client.closer());
        let for_thread = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .stack_size(CLIENT_STACK)
            .spawn(move || body(client, for_thread))?;
        Ok(Worker { stop, thread: handle.thread().clone(), closer })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.0.store(true, Ordering::SeqCst);
        self.thread.unpark();
        if let Some(closer) = self.closer.take() {
            closer.close();
        }
    }
}
