//! Write-ahead log records: what the device logs before it acknowledges a command.
//!
//! One record is one command: a store or a delete is a batch of one operation, a batch is all of
//! its operations in one record (so it is replayed whole or not at all: the log's framing drops a
//! record missing any fragment), and namespace creation and deletion are records of their own.
//!
//! ```text
//! 0  sequence number u64 LE       one more than the previous record's
//! 8  kind u8                      1 operations, 2 create namespace, 3 delete namespace,
//!                                 4 create named namespace
//! 9  body
//!    operations:  count u32, then per operation: op u8 (1 store, 2 delete) | namespace u32 |
//!                 key_len u8 | key | [value_len u32 | value]   (stores are upserts: insert-only
//!                 and update-only were decided before logging)
//!    create:      namespace u32 | spec (see `encode_spec`)
//!    create named: namespace u32 | spec | name (see `encode_name`)
//!    delete:      namespace u32
//! ```
//!
//! A namespace without a name is logged as kind 2, exactly as before names existed, so logs
//! written by earlier builds replay unchanged; kind 4 is new with names.

use crate::durability::error::FormatError;
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
/// 1 pink-noopt, 2 pink-range, 3 lightstore, 4 hash, 5 kaml, 6 pink-gcrewrite, 7 block, 8 pink-hw) | logs (u8 flag, count u32,
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

pub(crate) fn decode_spec(reader: &mut ByteReader<'_>) -> Result<NamespaceSpec, FormatError> {
    let code = reader.u8()?;
    let preset = *crate::PresetKind::ALL
        .get(usize::from(code))
        .ok_or(FormatError::UnknownPreset(code))?;
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
        name: None,
    })
}

/// Appends a namespace's name: length u8 (0 for none) | UTF-8 bytes. Names are 1 to
/// [`crate::NAMESPACE_NAME_BYTES_MAX`] bytes, checked when the namespace is created.
pub(crate) fn encode_name(out: &mut Vec<u8>, name: Option<&str>) {
    let bytes = name.map_or(&[][..], str::as_bytes);
    debug_assert!(bytes.len() <= crate::NAMESPACE_NAME_BYTES_MAX);
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

pub(crate) fn decode_name(reader: &mut ByteReader<'_>) -> Result<Option<String>, FormatError> {
    let len = usize::from(reader.u8()?);
    if len == 0 {
        return Ok(None);
    }
    let bytes = reader.take(len)?;
    let name = String::from_utf8(bytes.to_vec()).map_err(|_| FormatError::NameNotUtf8)?;
    if name.contains('\0') {
        return Err(FormatError::NameHasNul);
    }
    Ok(Some(name))
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
            out.push(if spec.name.is_some() { 4 } else { 2 });
            out.extend_from_slice(&namespace.to_le_bytes());
            encode_spec(&mut out, spec);
            if let Some(name) = &spec.name {
                encode_name(&mut out, Some(name));
            }
        }
        WalRecord::DeleteNamespace { namespace } => {
            out.push(3);
            out.extend_from_slice(&namespace.to_le_bytes());
        }
    }
    out
}

/// Decodes a record; bad bytes give an error naming what is wrong, never a panic.
pub fn decode(bytes: &[u8]) -> Result<(u64, WalRecord), FormatError> {
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
                    _ => return Err(FormatError::UnknownOperationKind(kind)),
                });
            }
            WalRecord::Ops(ops)
        }
        kind @ (2 | 4) => {
            let namespace = reader.u32()?;
            let mut spec = decode_spec(&mut reader)?;
            if kind == 4 {
                spec.name = Some(decode_name(&mut reader)?.ok_or(FormatError::NameMissing)?);
            }
            WalRecord::CreateNamespace { namespace, spec }
        }
        3 => WalRecord::DeleteNamespace {
            namespace: reader.u32()?,
        },
        kind => return Err(FormatError::UnknownRecordKind(kind)),
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
                    name: None,
                },
            },
            WalRecord::CreateNamespace {
                namespace: 5,
                spec: NamespaceSpec::new(Preset::Pink).with_name("users é"),
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
        assert_eq!(decode(&[0; 9]), Err(FormatError::UnknownRecordKind(0)));
    }

    #[test]
    fn wal_unnamed_namespaces_keep_the_format_earlier_builds_wrote() {
        let record = WalRecord::CreateNamespace {
            namespace: 2,
            spec: NamespaceSpec::new(Preset::Pink),
        };
        // lsn, kind 2, namespace, preset 0, no logs, no quota: the bytes builds without names wrote.
        let mut expected = 9u64.to_le_bytes().to_vec();
        expected.extend_from_slice(&[2, 2, 0, 0, 0, 0, 0, 0]);
        assert_eq!(encode(9, &record), expected);
        // A named record whose name is empty, not UTF-8, or holds a NUL is refused.
        for (name, error) in [
            (&b""[..], FormatError::NameMissing),
            (&[0xff][..], FormatError::NameNotUtf8),
            (&b"a\0b"[..], FormatError::NameHasNul),
        ] {
            let mut bytes = 1u64.to_le_bytes().to_vec();
            // Kind 4, namespace 2, preset 0, no logs, no quota, then the name.
            bytes.extend_from_slice(&[4, 2, 0, 0, 0, 0, 0, 0]);
            bytes.push(name.len() as u8);
            bytes.extend_from_slice(name);
            assert_eq!(decode(&bytes), Err(error), "name {name:?}");
        }
    }
}
