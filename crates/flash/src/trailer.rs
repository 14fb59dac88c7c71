//! The flash layer's own bytes in every page's OOB area: a trailer naming the page's program and
//! a checksum over the page.

/// Magic number at the start of every programmed page's trailer ("PAGE").
pub(crate) const PAGE_MAGIC: u32 = u32::from_le_bytes(*b"PAGE");

/// The flash layer's 16-byte trailer at the start of every page's OOB area.
pub(crate) struct Trailer {
    pub(crate) magic: u32,
    pub(crate) crc: u32,
    pub(crate) sequence: u64,
}

impl Trailer {
    pub(crate) fn decode(oob: &[u8]) -> Trailer {
        let mut magic = [0u8; 4];
        let mut crc = [0u8; 4];
        let mut sequence = [0u8; 8];
        magic.copy_from_slice(&oob[0..4]);
        crc.copy_from_slice(&oob[4..8]);
        sequence.copy_from_slice(&oob[8..16]);
        Trailer {
            magic: u32::from_le_bytes(magic),
            crc: u32::from_le_bytes(crc),
            sequence: u64::from_le_bytes(sequence),
        }
    }

    /// Whether the trailer names a program of its page made since the block's erase at
    /// `erase_sequence` (an older one belongs to a program the erase undid).
    pub(crate) fn names_program_since(&self, erase_sequence: u64) -> bool {
        self.magic == PAGE_MAGIC && self.sequence >= erase_sequence
    }

    pub(crate) fn encode(&self, oob: &mut [u8]) {
        oob[0..4].copy_from_slice(&self.magic.to_le_bytes());
        oob[4..8].copy_from_slice(&self.crc.to_le_bytes());
        oob[8..16].copy_from_slice(&self.sequence.to_le_bytes());
    }
}

/// CRC-32C of a page: payload, the whole user OOB area (as stored, zero-padded), then the page's own
/// index and program sequence, so that a page read from the wrong place or a stale copy fails too.
pub(crate) fn page_crc(data: &[u8], user_oob: &[u8], index: u64, sequence: u64) -> u32 {
    let crc = crc32c::crc32c(data);
    let crc = crc32c::crc32c_append(crc, user_oob);
    let crc = crc32c::crc32c_append(crc, &index.to_le_bytes());
    crc32c::crc32c_append(crc, &sequence.to_le_bytes())
}
