//! Ctrl-C (SIGINT), SIGTERM and SIGHUP: the temporaries registered in
//! `mage_common::cleanup` (a staged case, an atomic write's hidden file,
//! a work folder) are removed, then the process exits with 128 + the
//! signal's number (130 for Ctrl-C). The handler only writes the signal's
//! number to a pipe; a thread reads it and cleans up. A signal ignored when
//! the process starts (`nohup`) stays ignored.

use std::sync::atomic::{AtomicI32, Ordering};

static WRITE_END: AtomicI32 = AtomicI32::new(-1);
/// The signal received, 0 before any.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    RECEIVED.store(signal, Ordering::SeqCst);
    let byte = signal as u8;
    // SAFETY: write(2) is async-signal-safe; the fd stays open for the
    // life of the process.
    unsafe { libc::write(WRITE_END.load(Ordering::Relaxed), (&byte as *const u8).cast(), 1) };
}

/// Installs the handlers (once, at the start of `main`). Child processes
/// get the default actions back when they exec.
pub fn clean_up_on_interrupt() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe(2) fills the two fds.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return;
    }
    let [read_end, write_end] = fds;
    WRITE_END.store(write_end, Ordering::Relaxed);
    std::thread::spawn(move || {
        let mut byte = 0u8;
        loop {
            // SAFETY: reads one byte into `byte`.
            let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
            if n == 1 {
                break;
            }
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let _held = mage_common::cleanup::clean_up();
        std::process::exit(128 + byte as i32);
    });
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a plain handler that only calls write(2); SA_RESTART so
        // the main thread's reads and writes go on until the exit. A signal
        // the parent ignores (`nohup`, a background job) stays ignored.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 || old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Where a signal arrived, waits for the thread cleaning up to end the
/// process (so that an error the clean-up caused in the command, a file
/// gone from under it, is neither printed nor its exit status).
pub fn wait_if_interrupted() {
    if RECEIVED.load(Ordering::SeqCst) != 0 {
        loop {
            std::thread::park();
        }
    }
}
