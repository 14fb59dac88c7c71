//! Checkpoints and the superblock's body (the root record).
//!
//! A checkpoint is one record, framed like a log record ([`super::log`]) with its own log id on
//! consecutive pages of checkpoint blocks:
//!
//! ```text
//! "KCKP" | version u32 = 2 | next sequence number u64 | next namespace id u32
//! namespaces: count u32, then per namespace: id u32 | spec (see `wal::encode_spec`) |
//!             name (see `wal::encode_name`; absent in version 1, which is still read)
//! space state: length u32 | bytes (the space layer's `export_state`)
//! parts: count u32, then per part: namespace u32 | replay-from sequence u64 | length u32 | bytes
//!        (each engine's own state: `LsmTree::durable_state`)
//! ```
//!
//! The superblock's body says where the newest checkpoint and the live log are:
//!
//! ```text
//! "KROOT" magic 4 bytes "KRT1" | mode u8 (1 write-ahead log, 2 power-loss protection)
//! next log id u32
//! checkpoint: present u8 | log id u32 | extents u16, then per extent: block u64 | first page u32 |
//!             pages u32
//! log:        log id u32 | blocks u16, then block u64 each
//! ```

use crate::durability::error::FormatError;
use crate::durability::wal::{decode_name, decode_spec, encode_name, encode_spec};
use crate::NamespaceSpec;
use kvssd_flash::codec::ByteReader;

const CHECKPOINT_MAGIC: &[u8; 4] = b"KCKP";
/// The checkpoint format version this build writes (2: namespaces carry names). It also reads
/// version 1, whose namespaces have no names.
pub const CHECKPOINT_VERSION: u32 = 2;
/// The oldest checkpoint format version this build reads.
pub const CHECKPOINT_VERSION_MIN: u32 = 1;
const ROOT_MAGIC: &[u8; 4] = b"KRT1";

/// A decoded checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The sequence number the next log record gets.
    pub next_lsn: u64,
    /// The id the next namespace gets.
    pub next_namespace: u32,
    /// Namespaces by id.
    pub namespaces: Vec<(u32, NamespaceSpec)>,
    /// The space layer's state.
    pub space: Vec<u8>,
    /// Engine states: (namespace, replay-from sequence number, bytes).
    pub parts: Vec<(u32, u64, Vec<u8>)>,
}

/// An engine state as [`Checkpoint::encode_with`] takes it: namespace, replay-from sequence
/// number, bytes.
pub type PartRef<'a> = (u32, u64, &'a [u8]);

impl Checkpoint {
    /// Encodes the checkpoint.
    pub fn encode(&self) -> Vec<u8> {
        let parts: Vec<PartRef<'_>> = self
            .parts
            .iter()
            .map(|(namespace, replay_from, bytes)| (*namespace, *replay_from, bytes.as_slice()))
            .collect();
        Checkpoint::encode_with(
            self.next_lsn,
            self.next_namespace,
            &self.namespaces,
            &self.space,
            &parts,
        )
    }

    /// Encodes a checkpoint of these fields, borrowing the space layer's state and the parts,
    /// into one buffer sized for them: [`Checkpoint::encode_head`], then each part's
    /// [`part_header`] and bytes.
    pub fn encode_with(
        next_lsn: u64,
        next_namespace: u32,
        namespaces: &[(u32, NamespaceSpec)],
        space: &[u8],
        parts: &[PartRef<'_>],
    ) -> Vec<u8> {
        let head =
            Checkpoint::encode_head(next_lsn, next_namespace, namespaces, space, parts.len());
        let bytes = head.len() + parts.iter().map(|part| 16 + part.2.len()).sum::<usize>();
        let mut out = Vec::with_capacity(bytes);
        out.extend_from_slice(&head);
        for &part in parts {
            out.extend_from_slice(&part_header(part));
            out.extend_from_slice(part.2);
        }
        out
    }

    /// Everything of a checkpoint before its parts, each of which follows as its
    /// [`part_header`] and its bytes. A checkpoint carries whole indexes' DRAM state (tens of
    /// megabytes of pinned levels at a few million keys of `pink` on a file image): the journal
    /// frames it from these pieces and the parts' own bytes, with no copy of the whole.
    pub fn encode_head(
        next_lsn: u64,
        next_namespace: u32,
        namespaces: &[(u32, NamespaceSpec)],
        space: &[u8],
        parts: usize,
    ) -> Vec<u8> {
        // Namespace specs and names are small; the reserve for them only saves a regrowth.
        let mut out = Vec::with_capacity(32 + namespaces.len() * 128 + space.len());
        out.extend_from_slice(CHECKPOINT_MAGIC);
        out.extend_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
        out.extend_from_slice(&next_lsn.to_le_bytes());
        out.extend_from_slice(&next_namespace.to_le_bytes());
        out.extend_from_slice(&(namespaces.len() as u32).to_le_bytes());
        for (id, spec) in namespaces {
            out.extend_from_slice(&id.to_le_bytes());
            encode_spec(&mut out, spec);
            encode_name(&mut out, spec.name.as_deref());
        }
        out.extend_from_slice(&(space.len() as u32).to_le_bytes());
        out.extend_from_slice(space);
        out.extend_from_slice(&(parts as u32).to_le_bytes());
        out
    }

    /// Decodes a checkpoint; bad bytes give an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Checkpoint, FormatError> {
        let mut reader = ByteReader::new(bytes);
        if reader.take(4)? != CHECKPOINT_MAGIC {
            return Err(FormatError::WrongMagic {
                structure: "checkpoint",
            });
        }
        let version = reader.u32()?;
        if !(CHECKPOINT_VERSION_MIN..=CHECKPOINT_VERSION).contains(&version) {
            return Err(FormatError::UnsupportedVersion {
                found: version,
                min: CHECKPOINT_VERSION_MIN,
                max: CHECKPOINT_VERSION,
            });
        }
        let next_lsn = reader.u64()?;
        let next_namespace = reader.u32()?;
        let count = reader.count(7)?;
        let mut namespaces = Vec::with_capacity(count);
        for _ in 0..count {
            let id = reader.u32()?;
            let mut spec = decode_spec(&mut reader)?;
            if version >= 2 {
                spec.name = decode_name(&mut reader)?;
            }
            namespaces.push((id, spec));
        }
        let space = reader.bytes32()?.to_vec();
        let count = reader.count(16)?;
        let mut parts = Vec::with_capacity(count);
        for _ in 0..count {
            let namespace = reader.u32()?;
            let replay_from = reader.u64()?;
            parts.push((namespace, replay_from, reader.bytes32()?.to_vec()));
        }
        reader.finish()?;
        Ok(Checkpoint {
            next_lsn,
            next_namespace,
            namespaces,
            space,
            parts,
        })
    }
}

/// A part's header in a checkpoint: namespace u32 | replay-from sequence u64 | length u32.
pub fn part_header((namespace, replay_from, bytes): PartRef<'_>) -> [u8; 16] {
    let mut header = [0u8; 16];
    header[..4].copy_from_slice(&namespace.to_le_bytes());
    header[4..12].copy_from_slice(&replay_from.to_le_bytes());
    header[12..].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    header
}

/// Which durability protocol a device image uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Write-ahead log, checkpoints and log replay.
    Wal,
    /// Power-loss protection: a dump of DRAM state written at the cut.
    Plp,
}

/// Consecutive pages of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Block index.
    pub block: u64,
    /// First page in the block.
    pub first_page: u32,
    /// Pages.
    pub pages: u32,
}

/// Where a checkpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointLocation {
    /// The log id its pages carry.
    pub log_id: u32,
    /// Its pages, in order.
    pub extents: Vec<Extent>,
}

/// The superblock's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The protocol.
    pub mode: Mode,
    /// The id the next log or checkpoint gets (ids are never reused, so a page of an older log or
    /// checkpoint is never taken for part of a newer one).
    pub next_log_id: u32,
    /// The newest checkpoint.
    pub checkpoint: Option<CheckpointLocation>,
    /// The live log's id.
    pub log_id: u32,
    /// The live log's blocks, in order (its pages are numbered from 0 across them).
    pub log_blocks: Vec<u64>,
}

impl Root {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(ROOT_MAGIC);
        out.push(match self.mode {
            Mode::Wal => 1,
            Mode::Plp => 2,
        });
        out.extend_from_slice(&self.next_log_id.to_le_bytes());
        match &self.checkpoint {
            None => out.push(0),
            Some(location) => {
                out.push(1);
                out.extend_from_slice(&location.log_id.to_le_bytes());
                out.extend_from_slice(&(location.extents.len() as u16).to_le_bytes());
                for extent in &location.extents {
                    out.extend_from_slice(&extent.block.to_le_bytes());
                    out.extend_from_slice(&extent.first_page.to_le_bytes());
                    out.extend_from_slice(&extent.pages.to_le_bytes());
                }
            }
        }
        out.extend_from_slice(&self.log_id.to_le_bytes());
        out.extend_from_slice(&(self.log_blocks.len() as u16).to_le_bytes());
        for block in &self.log_blocks {
            out.extend_from_slice(&block.to_le_bytes());
        }
        out
    }

    /// Decodes the body; bad bytes give an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Root, FormatError> {
        let mut reader = ByteReader::new(bytes);
        if reader.take(4)? != ROOT_MAGIC {
            return Err(FormatError::WrongMagic {
                structure: "root record",
            });
        }
        let mode = match reader.u8()? {
            1 => Mode::Wal,
            2 => Mode::Plp,
            other => return Err(FormatError::UnknownMode(other)),
        };
        let next_log_id = reader.u32()?;
        let checkpoint = match reader.u8()? {
            0 => None,
            _ => {
                let log_id = reader.u32()?;
                let count = reader.u16()?;
                let mut extents = Vec::with_capacity(usize::from(count));
                for _ in 0..count {
                    extents.push(Extent {
                        block: reader.u64()?,
                        first_page: reader.u32()?,
                        pages: reader.u32()?,
                    });
                }
                Some(CheckpointLocation { log_id, extents })
            }
        };
        let log_id = reader.u32()?;
        let count = reader.u16()?;
        let mut log_blocks = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            log_blocks.push(reader.u64()?);
        }
        reader.finish()?;
        Ok(Root {
            mode,
            next_log_id,
            checkpoint,
            log_id,
            log_blocks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvssd_engine::Preset;

    #[test]
    fn checkpoint_and_root_round_trip_and_reject_garbage() {
        let checkpoint = Checkpoint {
            next_lsn: 42,
            next_namespace: 3,
            namespaces: vec![
                (1, NamespaceSpec::new(Preset::Pink)),
                (
                    2,
                    NamespaceSpec::new(Preset::Lightstore).with_name("keyspace_test"),
                ),
            ],
            space: vec![1, 2, 3],
            parts: vec![(1, 40, vec![9; 20])],
        };
        let bytes = checkpoint.encode();
        assert_eq!(Checkpoint::decode(&bytes), Ok(checkpoint));
        for cut in 0..bytes.len() {
            assert!(Checkpoint::decode(&bytes[..cut]).is_err());
        }
        let root = Root {
            mode: Mode::Wal,
            next_log_id: 9,
            checkpoint: Some(CheckpointLocation {
                log_id: 7,
                extents: vec![Extent {
                    block: 4,
                    first_page: 2,
                    pages: 3,
                }],
            }),
            log_id: 8,
            log_blocks: vec![5, 6],
        };
        let bytes = root.encode();
        assert_eq!(Root::decode(&bytes), Ok(root));
        for cut in 0..bytes.len() {
            assert!(Root::decode(&bytes[..cut]).is_err());
        }
    }

    #[test]
    fn checkpoint_version_1_without_names_is_still_read() {
        // A version-1 checkpoint as earlier builds wrote it: one pink namespace, no names.
        let mut bytes = CHECKPOINT_MAGIC.to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&42u64.to_le_bytes());
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&[0, 0, 0]);
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        let decoded = Checkpoint::decode(&bytes).expect("version 1 decodes");
        assert_eq!(
            decoded.namespaces,
            vec![(1, NamespaceSpec::new(Preset::Pink))]
        );
        // A version from the future is refused with a message naming it.
        let mut future = bytes.clone();
        future[4..8].copy_from_slice(&(CHECKPOINT_VERSION + 1).to_le_bytes());
        let error = Checkpoint::decode(&future).expect_err("a future version is refused");
        assert_eq!(
            error,
            FormatError::UnsupportedVersion {
                found: 3,
                min: 1,
                max: 2
            }
        );
        assert!(
            error.to_string().contains("version 3 is not supported"),
            "{error}"
        );
    }
}
