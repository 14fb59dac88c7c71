//! Write-ahead log records: what the device logs before it acknowledges a command.
//!
//! One record is one command: a store or a delete is a batch of one operation, a batch is all of
//! its operations in one record (so it is replayed whole or not at all: the log's framing drops a
//! record missing any fragment), and namespace creation and deletion are records of their own.
//!
//! ```text
//! 0  sequence number u64 LE       one more than the previous record's
//! 8  kind u8                      1 operations, 2 create namespace, 3 delete namespace
//! 9  body
//!    operations:  count u32, then per operation: op u8 (1 store, 2 delete) | namespace u32 |
//!                 key_len u8 | key | [value_len u32 | value]   (stores are upserts: insert-only
//!                 and update-only were decided before logging)
//!    create:      namespace u32 | spec (see `encode_spec`)
//!    delete:      namespace u32
//! ```

use crate::NamespaceSpec;
use kvssd_flash::codec::ByteReader;

/// One logged store or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalOp {
    /// Upsert of a pair.
    Store {
        /// Namespace id.
        namespace: u32,
        /// Key.
        key: Vec<u8>,
        /// Value.
        value: Vec<u8>,
    },
    /// Delete of a key.
    Delete {
        /// Namespace id.
        namespace: u32,
        /// Key.
        key: Vec<u8>,
    },
}

impl WalOp {
    /// The namespace it applies to.
    pub fn namespace(&self) -> u32 {
        match self {
            WalOp::Store { namespace, .. } | WalOp::Delete { namespace, .. } => *namespace,
        }
    }
}

/// One log record's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalRecord {
    /// Stores and deletes applied together (a command or a batch).
    Ops(Vec<WalOp>),
    /// A namespace created with an id and attributes.
    CreateNamespace {
        /// Its id.
        namespace: u32,
        /// Its attributes (logs resolved).
        spec: NamespaceSpec,
    },
    /// A namespace deleted.
    DeleteNamespace {
        /// Its id.
        namespace: u32,
    },
}

/// Appends a namespace's attributes: preset u8 (index in `PresetKind::ALL`: 0 pink,
/// 1 pink-noopt, 2 pink-range, 3 lightstore, 4 hash, 5 kaml, 6 pink-gcrewrite) | logs (u8 flag, count u32,
/// u32 each) | quota (u8 flag, u64).
pub(crate) fn encode_spec(out: &mut Vec<u8>, spec: &NamespaceSpec) {
    out.push(spec.preset.code());
    match &spec.logs {
        None => out.push(0),
        Some(logs) => {
            out.push(1);
            out.extend_from_slice(&(logs.len() as u32).to_le_bytes());
            for log in logs {
                out.extend_from_slice(&log.to_le_bytes());
            }
        }
    }
    match spec.quota_bytes {
        None => out.push(0),
        Some(quota) => {
            out.push(1);
            out.extend_from_slice(&quota.to_le_bytes());
        }
    }
}

pub(crate) fn decode_spec(reader: &mut ByteReader<'_>) -> Result<NamespaceSpec, String> {
    let preset = *crate::PresetKind::ALL
        .get(usize::from(reader.u8()?))
        .ok_or("an unknown preset")?;
    let logs = match reader.u8()? {
        0 => None,
        _ => {
            let count = reader.count(4)?;
            let mut logs = Vec::with_capacity(count);
            for _ in 0..count {
                logs.push(reader.u32()?);
            }
            Some(logs)
        }
    };
    let quota_bytes = match reader.u8()? {
        0 => None,
        _ => Some(reader.u64()?),
    };
    Ok(NamespaceSpec {
        preset,
        logs,
        quota_bytes,
    })
}

/// Encodes a record with its sequence number.
pub fn encode(lsn: u64, record: &WalRecord) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&lsn.to_le_bytes());
    match record {
        WalRecord::Ops(ops) => {
            out.push(1);
            out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
            for op in ops {
                match op {
                    WalOp::Store {
                        namespace,
                        key,
                        value,
                    } => {
                        out.push(1);
                        out.extend_from_slice(&namespace.to_le_bytes());
                        out.push(key.len() as u8);
                        out.extend_from_slice(key);
                        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                        out.extend_from_slice(value);
                    }
                    WalOp::Delete { namespace, key } => {
                        out.push(2);
                        out.extend_from_slice(&namespace.to_le_bytes());
                        out.push(key.len() as u8);
                        out.extend_from_slice(key);
                    }
                }
            }
        }
        WalRecord::CreateNamespace { namespace, spec } => {
            out.push(2);
            out.extend_from_slice(&namespace.to_le_bytes());
            encode_spec(&mut out, spec);
        }
        WalRecord::DeleteNamespace { namespace } => {
            out.push(3);
            out.extend_from_slice(&namespace.to_le_bytes());
        }
    }
    out
}

/// Decodes a record; bad bytes give an error naming what is wrong, never a panic.
pub fn decode(bytes: &[u8]) -> Result<(u64, WalRecord), String> {
    let mut reader = ByteReader::new(bytes);
    let lsn = reader.u64()?;
    let record = match reader.u8()? {
        1 => {
            let count = reader.count(7)?;
            let mut ops = Vec::with_capacity(count);
            for _ in 0..count {
                let kind = reader.u8()?;
                let namespace = reader.u32()?;
                let key = reader.key()?;
                ops.push(match kind {
                    1 => WalOp::Store {
                        namespace,
                        key,
                        value: reader.bytes32()?.to_vec(),
                    },
                    2 => WalOp::Delete { namespace, key },
                    _ => return Err(format!("unknown operation kind {kind}")),
                });
            }
            WalRecord::Ops(ops)
        }
        2 => {
            let namespace = reader.u32()?;
            let spec = decode_spec(&mut reader)?;
            WalRecord::CreateNamespace { namespace, spec }
        }
        3 => WalRecord::DeleteNamespace {
            namespace: reader.u32()?,
        },
        kind => return Err(format!("unknown record kind {kind}")),
    };
    reader.finish()?;
    Ok((lsn, record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvssd_engine::Preset;

    #[test]
    fn wal_records_round_trip_and_garbage_is_an_error() {
        let records = [
            WalRecord::Ops(vec![
                WalOp::Store {
                    namespace: 1,
                    key: b"k".to_vec(),
                    value: vec![7; 300],
                },
                WalOp::Delete {
                    namespace: 2,
                    key: b"gone".to_vec(),
                },
            ]),
            WalRecord::CreateNamespace {
                namespace: 3,
                spec: NamespaceSpec {
                    preset: Preset::Lightstore.into(),
                    logs: Some(vec![0, 2]),
                    quota_bytes: Some(1 << 20),
                },
            },
            WalRecord::CreateNamespace {
                namespace: 4,
                spec: NamespaceSpec::new(kvssd_engine::hash::HashPreset::Kaml),
            },
            WalRecord::DeleteNamespace { namespace: 3 },
        ];
        for (lsn, record) in records.iter().enumerate() {
            let bytes = encode(lsn as u64, record);
            assert_eq!(decode(&bytes), Ok((lsn as u64, record.clone())));
            for cut in 0..bytes.len() {
                assert!(
                    decode(&bytes[..cut]).is_err(),
                    "prefix of {cut} bytes decoded"
                );
            }
        }
        assert!(decode(&[0; 9]).is_err());
    }
}
