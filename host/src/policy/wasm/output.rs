//! A call's stdout or stderr, bounded per call and drained after each one: an instance reused
//! between calls gives every call the whole budget and forwards only that call's lines.
//! (wasmtime-wasi's `MemoryOutputPipe` keeps everything ever written, against one capacity.)

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

#[derive(Clone)]
pub struct CallOutput {
    capacity: usize,
    buffer: Arc<Mutex<BytesMut>>,
}

impl CallOutput {
    pub fn new(capacity: usize) -> CallOutput {
        CallOutput {
            capacity,
            buffer: Arc::default(),
        }
    }

    /// What was written since the last take; the next call starts with the whole capacity.
    pub fn take(&self) -> Bytes {
        self.lock().split().freeze()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BytesMut> {
        // A panic while holding it leaves bytes, not a broken invariant.
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait::async_trait]
impl OutputStream for CallOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        let mut buffer = self.lock();
        if bytes.len() > self.capacity - buffer.len() {
            return Err(StreamError::Trap(wasmtime::format_err!(
                "the call wrote more than its {} bytes of output (maxOutput)",
                self.capacity
            )));
        }
        buffer.extend_from_slice(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        let used = self.lock().len();
        if used < self.capacity {
            Ok(self.capacity - used)
        } else {
            // Full for this call: it can never write again.
            Err(StreamError::Closed)
        }
    }
}

#[async_trait::async_trait]
impl Pollable for CallOutput {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CallOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut buffer = self.lock();
        let amount = buf.len().min(self.capacity - buffer.len());
        buffer.extend_from_slice(&buf[..amount]);
        Poll::Ready(Ok(amount))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CallOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CallOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_take_starts_the_next_call_with_the_whole_capacity() {
        let output = CallOutput::new(4);
        let mut stream = output.clone();
        stream.write(Bytes::from_static(b"abcd")).unwrap();
        assert!(matches!(stream.check_write(), Err(StreamError::Closed)));
        assert!(stream.write(Bytes::from_static(b"e")).is_err());
        assert_eq!(output.take(), Bytes::from_static(b"abcd"));
        assert_eq!(stream.check_write().unwrap(), 4);
        stream.write(Bytes::from_static(b"ef")).unwrap();
        assert_eq!(output.take(), Bytes::from_static(b"ef"));
        assert!(output.take().is_empty());
    }
}
