//! Exact counts of flash operations, by the purpose the caller gave each one.
//!
//! Every read, program and erase names a [`Purpose`]. Write amplification, "flash reads per GET" and
//! "compaction share of I/O" are all computed from these counts. A [`Counters`] value is a plain snapshot:
//! take one before a phase and subtract it from one taken after to get the phase's own figures.

use std::fmt;
use std::ops::Sub;

/// Why a flash operation was issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Purpose {
    /// Values written by, or read for, the user.
    UserData,
    /// Index pages (meta segments, hash buckets) read or written on the foreground path.
    Index,
    /// Reads and writes done by compaction.
    Compaction,
    /// Reads, writes and erases done by garbage collection.
    Gc,
    /// Write-ahead log records.
    Log,
    /// Checkpoints of DRAM state (level lists, pinned levels, namespace table) and PLP dumps.
    Checkpoint,
    /// Reads done while recovering after a restart.
    Recovery,
}

impl Purpose {
    /// Every purpose, in a fixed order.
    pub const ALL: [Purpose; 7] = [
        Purpose::UserData,
        Purpose::Index,
        Purpose::Compaction,
        Purpose::Gc,
        Purpose::Log,
        Purpose::Checkpoint,
        Purpose::Recovery,
    ];

    /// A short lowercase name, used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Purpose::UserData => "user",
            Purpose::Index => "index",
            Purpose::Compaction => "compaction",
            Purpose::Gc => "gc",
            Purpose::Log => "log",
            Purpose::Checkpoint => "checkpoint",
            Purpose::Recovery => "recovery",
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// Counts of one purpose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OperationCounts {
    /// Pages read.
    pub reads: u64,
    /// Payload bytes read.
    pub read_bytes: u64,
    /// Pages programmed.
    pub programs: u64,
    /// Payload bytes programmed.
    pub program_bytes: u64,
    /// Blocks erased.
    pub erases: u64,
    /// Payload bytes erased (blocks times block size).
    pub erase_bytes: u64,
}

impl Sub for OperationCounts {
    type Output = OperationCounts;

    fn sub(self, earlier: OperationCounts) -> OperationCounts {
        OperationCounts {
            reads: self.reads - earlier.reads,
            read_bytes: self.read_bytes - earlier.read_bytes,
            programs: self.programs - earlier.programs,
            program_bytes: self.program_bytes - earlier.program_bytes,
            erases: self.erases - earlier.erases,
            erase_bytes: self.erase_bytes - earlier.erase_bytes,
        }
    }
}

impl std::ops::AddAssign for OperationCounts {
    fn add_assign(&mut self, other: OperationCounts) {
        self.reads += other.reads;
        self.read_bytes += other.read_bytes;
        self.programs += other.programs;
        self.program_bytes += other.program_bytes;
        self.erases += other.erases;
        self.erase_bytes += other.erase_bytes;
    }
}

/// Counts of every purpose: a snapshot that can be subtracted from a later one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    by_purpose: [OperationCounts; Purpose::ALL.len()],
}

impl Counters {
    /// The counts of one purpose.
    pub fn of(&self, purpose: Purpose) -> OperationCounts {
        self.by_purpose[purpose.slot()]
    }

    /// The counts of all purposes added up.
    pub fn total(&self) -> OperationCounts {
        let mut total = OperationCounts::default();
        for counts in self.by_purpose {
            total += counts;
        }
        total
    }

    /// Write amplification: pages programmed for any purpose per page programmed for user data.
    /// `None` when no user data was programmed.
    pub fn write_amplification(&self) -> Option<f64> {
        let user = self.of(Purpose::UserData).program_bytes;
        (user > 0).then(|| self.total().program_bytes as f64 / user as f64)
    }

    pub(crate) fn record_read(&mut self, purpose: Purpose, bytes: u64) {
        let counts = &mut self.by_purpose[purpose.slot()];
        counts.reads += 1;
        counts.read_bytes += bytes;
    }

    pub(crate) fn record_program(&mut self, purpose: Purpose, bytes: u64) {
        let counts = &mut self.by_purpose[purpose.slot()];
        counts.programs += 1;
        counts.program_bytes += bytes;
    }

    pub(crate) fn record_erase(&mut self, purpose: Purpose, bytes: u64) {
        let counts = &mut self.by_purpose[purpose.slot()];
        counts.erases += 1;
        counts.erase_bytes += bytes;
    }
}

impl Sub for Counters {
    type Output = Counters;

    fn sub(self, earlier: Counters) -> Counters {
        let mut by_purpose = self.by_purpose;
        for (slot, earlier) in by_purpose.iter_mut().zip(earlier.by_purpose) {
            *slot = *slot - earlier;
        }
        Counters { by_purpose }
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<11} {:>12} {:>12} {:>10}",
            "purpose", "reads", "programs", "erases"
        )?;
        for purpose in Purpose::ALL {
            let counts = self.of(purpose);
            writeln!(
                f,
                "{:<11} {:>12} {:>12} {:>10}",
                purpose.name(),
                counts.reads,
                counts.programs,
                counts.erases
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_snapshots_subtract_per_purpose() {
        let mut counters = Counters::default();
        counters.record_program(Purpose::UserData, 100);
        let before = counters;
        counters.record_program(Purpose::UserData, 100);
        counters.record_program(Purpose::Gc, 100);
        counters.record_read(Purpose::Index, 10);
        counters.record_erase(Purpose::Gc, 1000);
        let phase = counters - before;
        assert_eq!(phase.of(Purpose::UserData).programs, 1);
        assert_eq!(phase.of(Purpose::Gc).programs, 1);
        assert_eq!(phase.of(Purpose::Gc).erase_bytes, 1000);
        assert_eq!(phase.of(Purpose::Index).read_bytes, 10);
        assert_eq!(phase.total().programs, 2);
        assert_eq!(phase.write_amplification(), Some(2.0));
        assert_eq!(Counters::default().write_amplification(), None);
    }
}
