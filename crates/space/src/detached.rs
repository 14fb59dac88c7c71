//! Record reads whose flash read runs without the space's lock (file media): the record's page
//! is found and its read issued here, under the caller's lock, and
//! [`DetachedRecord::finish_value`] reads and checks it after the lock is released.

use kvssd_flash::{DetachedRead, Purpose, SimTime};

use crate::layout;
use crate::{PageIndex, Record, RecordPointer, Result, Space, SpaceError, RECORD_HEADER_BYTES};

/// A record read: already done, or issued with its flash read left to run.
pub enum RecordRead {
    /// The record, read under the caller's lock (it was in an open page in DRAM, it is a large
    /// record, or the media cannot detach a read).
    Ready(Record, SimTime),
    /// The read was issued (timed and counted) and completes at the given time; run it with
    /// [`DetachedRecord::finish_value`].
    Detached(DetachedRecord, SimTime),
}

/// A record whose page read runs without the space's lock.
pub struct DetachedRecord {
    /// A read of the record's bytes alone.
    read: DetachedRead,
    page: PageIndex,
    /// The record's value length, as its index filed it.
    value_len: usize,
}

impl Space {
    /// Reads the record a pointer names as [`Space::read_record`] does, except that on file
    /// media the page read is issued here and performed by [`DetachedRecord::finish_value`], so the
    /// caller can release its lock first. `key_len` and `value_len` are the record's as its index
    /// filed it: a small record's bytes are read alone, and verified by the record's checksum.
    /// (If they are wrong, the detached read fails and the record is read again under the lock,
    /// from its own header.) A large record is read under the lock.
    pub fn read_record_detached(
        &mut self,
        at: SimTime,
        pointer: RecordPointer,
        key_len: usize,
        value_len: usize,
        purpose: Purpose,
    ) -> Result<RecordRead> {
        if !self.check_generation(pointer)? {
            return Err(SpaceError::StalePointer(pointer));
        }
        let page = pointer.page();
        let offset = pointer.chunk() as usize * self.config.chunk_bytes as usize;
        let end = offset + RECORD_HEADER_BYTES + key_len + value_len;
        if self.open_page_holding(page).is_none()
            && !self.is_large(key_len, value_len)
            && end <= self.geometry.page_bytes as usize
        {
            let address = self.page_address(page)?;
            if let Some((read, done)) =
                self.flash
                    .read_detached_range(at, address, purpose, offset..end)?
            {
                let record = DetachedRecord {
                    read,
                    page,
                    value_len,
                };
                return Ok(RecordRead::Detached(record, done));
            }
        }
        let (record, done) = self.read_record(at, pointer, purpose)?;
        Ok(RecordRead::Ready(record, done))
    }
}

impl DetachedRecord {
    /// Reads the record, which must hold `key`, and returns its value. The record's bytes are
    /// read in one `pread` into the buffer the value is then returned in (moved to its start),
    /// not copied out of it. `None` if the read must be made again under the lock: the page's
    /// block was erased since the read was issued, or the bytes are not a small record of `key`
    /// with the lengths its index filed and a matching checksum.
    pub fn finish_value(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(record) = self.read.run()? else {
            return Ok(None);
        };
        Ok(layout::small_value_in_place(record, key, self.value_len, self.page).ok())
    }

    /// [`DetachedRecord::finish_value`] for several records, each with the key it must hold, in
    /// order; records that lie close together in the file are read with one `pread`
    /// ([`DetachedRead::run_all`]).
    pub fn finish_values(records: &[(&DetachedRecord, &[u8])]) -> Result<Vec<Option<Vec<u8>>>> {
        let reads: Vec<&DetachedRead> = records.iter().map(|(record, _)| &record.read).collect();
        let bytes = DetachedRead::run_all(&reads)?;
        Ok(bytes
            .into_iter()
            .zip(records)
            .map(|(bytes, (record, key))| {
                bytes.and_then(|bytes| {
                    layout::small_value_in_place(bytes, key, record.value_len, record.page).ok()
                })
            })
            .collect())
    }
}
