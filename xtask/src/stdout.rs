//! Printing to stdout without a panic: a failed write (stdout on a full
//! disk) is an error the command returns, and a closed pipe (`| head -1`)
//! ends the command quietly with the status a process killed by SIGPIPE
//! has, 141, as other command-line tools do.

use std::io::Write;
use std::sync::Mutex;

/// The error [`line`] returns on a closed pipe; `main` exits quietly on it.
pub const CLOSED_PIPE: &str = "stdout is a closed pipe";
/// The exit status on a closed pipe: 128 + SIGPIPE.
pub const CLOSED_PIPE_STATUS: u8 = 141;

/// The first failed write, for callers that cannot return it at once.
static FAILED: Mutex<Option<String>> = Mutex::new(None);

/// Writes `text` and a newline to stdout, flushed.
pub fn line(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    let written = writeln!(out, "{text}").and_then(|()| out.flush());
    written.map_err(|e| {
        let e = if e.kind() == std::io::ErrorKind::BrokenPipe { CLOSED_PIPE.to_string() } else { format!("writing to stdout: {e}") };
        FAILED.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e.clone());
        e
    })
}

/// The first write to stdout that failed, if any did.
pub fn failed() -> Option<String> {
    FAILED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}
