//! The memory a command needs, against what the host and the GPU have,
//! checked before any input is generated, read or allocated: work that
//! cannot fit fails at once, with both numbers, instead of after minutes or
//! by an abort.

use mage_common::op::{CURRENT, Op};

/// What one workload needs, part by part, in bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Need {
    /// `triangle 8192x4`.
    pub what: String,
    pub parts: Vec<(&'static str, u64)>,
}

impl Need {
    pub fn total(&self) -> u64 {
        self.parts.iter().map(|(_, b)| b).sum()
    }
}

/// Memory available, and the limit it comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Available {
    pub bytes: u64,
    pub source: &'static str,
}

/// Where a workload runs, which decides what it holds at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Machine {
    Emulator,
    Gpu,
}

fn input_bytes(op: &Op, dims: &[u32]) -> (u64, u64) {
    let lens = op.input_lens(dims);
    (lens.iter().map(|&n| n as u64 * 4).sum(), lens.iter().map(|&n| n as u64 * 4).max().unwrap_or(0))
}

/// The most scratch (bytes) any stage `stage` may run needs at `dims`:
/// that stage's, or for `current` the largest of the stages supporting
/// `dims` (which one it picks may depend on the data, not read yet).
pub fn scratch_bytes(op: &Op, stage: &str, dims: &[u32]) -> u64 {
    let scratch = |s: &mage_common::op::Stage| (s.plan)(dims).scratch.iter().map(|&n| n as u64 * 4).sum::<u64>();
    op.stages.iter().filter(|s| (stage == CURRENT || s.name == stage) && (s.supports)(dims)).map(|s| scratch(s)).max().unwrap_or(0)
}

/// Host memory for `run` or one workload of `sweep`: the inputs, one input
/// again as file bytes (read from a case or written), the output (twice on
/// a GPU: before and after timing), the f64 reference and its magnitudes
/// (16 bytes per output element), the copies of the inputs its threads hold ([`Op::reference_copy_bytes`]),
/// and on the emulator the plan's scratch.
pub fn host_need_run(op: &Op, dims: &[u32], scratch: u64, machine: Machine) -> Need {
    let (inputs, largest) = input_bytes(op, dims);
    let output = op.output_len(dims) as u64 * 4;
    let mut parts = vec![("inputs", inputs), ("file staging", largest), ("reference threads' input copies", op.reference_copy_bytes(dims))];
    match machine {
        Machine::Emulator => parts.extend([("output", output), ("f64 reference and magnitudes", output * 4), ("scratch", scratch)]),
        Machine::Gpu => parts.extend([("outputs", output * 2), ("f64 reference and magnitudes", output * 4)]),
    }
    Need { what: format!("{} {}", op.name, Op::dims_label(dims)), parts }
}

/// Host memory for `fixtures`: the inputs, and one of them again as bytes.
pub fn host_need_fixtures(op: &Op, dims: &[u32]) -> Need {
    let (inputs, largest) = input_bytes(op, dims);
    Need { what: format!("{} {}", op.name, Op::dims_label(dims)), parts: vec![("inputs", inputs), ("file staging", largest)] }
}

/// Device memory for one call: inputs, the output and the plan's scratch.
pub fn gpu_need(op: &Op, dims: &[u32], scratch: u64) -> Need {
    let (inputs, _) = input_bytes(op, dims);
    let output = op.output_len(dims) as u64 * 4;
    Need {
        what: format!("{} {}", op.name, Op::dims_label(dims)),
        parts: vec![("inputs", inputs), ("output", output), ("scratch", scratch)],
    }
}

/// `5368709120 bytes (5.0 GiB)`.
fn bytes_text(b: u64) -> String {
    format!("{b} bytes ({:.1} GiB)", b as f64 / (1u64 << 30) as f64)
}

/// Refuses `need` where it exceeds `available`; `place` is `host` or `GPU`.
pub fn check_fits(need: &Need, available: Available, place: &str) -> Result<(), String> {
    if need.total() <= available.bytes {
        return Ok(());
    }
    let parts: Vec<String> = need.parts.iter().filter(|(_, b)| *b > 0).map(|(name, b)| format!("{name} {b}")).collect();
    Err(format!(
        "{} needs {} of {place} memory ({}); {} available ({})",
        need.what,
        bytes_text(need.total()),
        parts.join(", "),
        bytes_text(available.bytes),
        available.source
    ))
}

/// The least of what Linux says may still be allocated: `MemAvailable`,
/// the cgroup's limit less its usage, and the address-space limit
/// (`ulimit -v`) less this process's size. `None` where none is readable.
pub fn host_available() -> Option<Available> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let meminfo = read("/proc/meminfo").and_then(|t| kib_field(&t, "MemAvailable:")).map(|b| (b, "MemAvailable"));
    let cgroup = read("/proc/self/cgroup").and_then(|c| cgroup_v2_path(&c)).and_then(|path| {
        let dir = format!("/sys/fs/cgroup{path}");
        cgroup_headroom(&read(&format!("{dir}/memory.max"))?, &read(&format!("{dir}/memory.current"))?)
    });
    let address = read("/proc/self/limits").and_then(|l| address_space_limit(&l)).and_then(|limit| {
        let size = read("/proc/self/status").and_then(|s| kib_field(&s, "VmSize:"))?;
        Some(limit.saturating_sub(size))
    });
    [meminfo, cgroup.map(|b| (b, "cgroup memory.max less memory.current")), address.map(|b| (b, "address-space limit, ulimit -v"))]
        .into_iter()
        .flatten()
        .min_by_key(|(b, _)| *b)
        .map(|(bytes, source)| Available { bytes, source })
}

/// A `Name:   123 kB` line of /proc/meminfo or /proc/self/status, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// The soft `Max address space` of /proc/self/limits, in bytes; `None`
/// when unlimited.
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..].split_whitespace().next()?.parse().ok()
}

/// This process's cgroup v2 path (`0::/path` in /proc/self/cgroup).
fn cgroup_v2_path(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_string)
}

/// `memory.max` less `memory.current`; `None` when `max` is unlimited.
fn cgroup_headroom(max: &str, current: &str) -> Option<u64> {
    let max: u64 = max.trim().parse().ok()?;
    let current: u64 = current.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_that_does_not_fit_is_refused_with_both_numbers() {
        let op = &mage_triangle::OP;
        let need = host_need_run(op, &[8192, 4], 0, Machine::Emulator);
        // A and B 1 GiB each, read back 1 GiB, output 1 GiB, f64 reference and magnitudes 4 GiB.
        assert_eq!(need.total(), 8 << 30);
        let available = Available { bytes: 2 << 30, source: "MemAvailable" };
        let e = check_fits(&need, available, "host").unwrap_err();
        assert!(e.starts_with("triangle 8192x4 needs 8589934592 bytes (8.0 GiB) of host memory (inputs 2147483648,"), "{e}");
        assert!(e.ends_with("; 2147483648 bytes (2.0 GiB) available (MemAvailable)"), "{e}");
        assert!(check_fits(&need, Available { bytes: 8 << 30, source: "MemAvailable" }, "host").is_ok());
    }

    #[test]
    fn device_memory_counts_inputs_output_and_the_largest_scratch() {
        let op = &mage_neighbor::OP;
        let dims = [4096, 64, 65536];
        let scratch = scratch_bytes(op, CURRENT, &dims);
        let most = op.stages.iter().filter(|s| (s.supports)(&dims)).map(|s| (s.plan)(&dims).scratch.iter().sum::<usize>() as u64 * 4).max();
        assert_eq!(Some(scratch), most);
        assert!(scratch > 0, "the merge-path stages use scratch");
        let need = gpu_need(op, &dims, scratch);
        let inputs = (4096 * 64 + 65536 + 4097 + 65536) * 4;
        assert_eq!(need.total(), inputs + 4096 * 64 * 4 + scratch);
        let free = Available { bytes: need.total() - 1, source: "free on the GPU, cuMemGetInfo" };
        let e = check_fits(&need, free, "GPU").unwrap_err();
        assert!(e.contains("of GPU memory") && e.contains("free on the GPU"), "{e}");
        assert!(check_fits(&need, Available { bytes: need.total(), ..free }, "GPU").is_ok());
    }

    #[test]
    fn linux_limits_parse() {
        assert_eq!(kib_field("MemTotal: 10 kB\nMemAvailable:   23171212 kB\n", "MemAvailable:"), Some(23171212 * 1024));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         3072000000           unlimited            bytes\n";
        assert_eq!(address_space_limit(limits), Some(3072000000));
        assert_eq!(address_space_limit(&limits.replace("3072000000", "unlimited")), None);
        assert_eq!(cgroup_v2_path("0::/user.slice/session-1.scope\n").as_deref(), Some("/user.slice/session-1.scope"));
        assert_eq!(cgroup_headroom("max\n", "100\n"), None);
        assert_eq!(cgroup_headroom("1000\n", "100\n"), Some(900));
    }

    #[test]
    fn this_host_reports_some_available_memory() {
        let a = host_available().expect("Linux exposes /proc/meminfo");
        assert!(a.bytes > 0, "{a:?}");
    }
}
