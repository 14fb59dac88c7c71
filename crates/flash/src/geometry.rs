//! Geometry of a NAND array and the addresses inside it.
//!
//! A device is `channels × ways_per_channel` dies; each die has `blocks_per_die` erase blocks of
//! `pages_per_block` pages; each page holds `page_bytes` of payload and `oob_bytes` of out-of-band
//! (spare) area. The first [`OOB_RESERVED_BYTES`] of every page's OOB belong to the flash layer (its
//! checksum trailer); the rest is [`Geometry::oob_user_bytes`] for the layers above.
//!
//! Dies are numbered so that consecutive die numbers sit on different channels: die `d` is on channel
//! `d % channels`, way `d / channels`. A writer that stripes over dies in number order therefore also
//! stripes over channels, which is what an FTL does to reach full parallelism.

use std::fmt;

/// Bytes of every page's OOB area that the flash layer keeps for itself: a magic number (4 bytes), a
/// CRC-32C of the page (4 bytes) and the device-wide program sequence number (8 bytes).
pub const OOB_RESERVED_BYTES: u32 = 16;

/// Smallest page the model accepts. Meta segments and data pages need room for their headers.
pub const PAGE_BYTES_MIN: u32 = 256;
/// Largest page the model accepts (NAND pages are at most a few tens of KiB).
pub const PAGE_BYTES_MAX: u32 = 64 * 1024;
/// Largest OOB area the model accepts.
pub const OOB_BYTES_MAX: u32 = 4096;
/// Upper bound on pages in a device, so that every page index fits the 40 bits engines use for it.
pub const DEVICE_PAGES_MAX: u64 = 1 << 40;

/// The shape of a NAND array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// Independent buses between the controller and the dies.
    pub channels: u32,
    /// Dies (ways) on each channel.
    pub ways_per_channel: u32,
    /// Erase blocks on each die.
    pub blocks_per_die: u32,
    /// Pages in each erase block; they must be programmed in order.
    pub pages_per_block: u32,
    /// Payload bytes of a page.
    pub page_bytes: u32,
    /// Out-of-band bytes of a page, including the [`OOB_RESERVED_BYTES`] the flash layer keeps.
    pub oob_bytes: u32,
}

/// Why a geometry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// A dimension is zero.
    #[error("invalid geometry: {field} must be at least 1")]
    Zero {
        /// Name of the field.
        field: &'static str,
    },
    /// The page size is outside the accepted range or not a multiple of 64 bytes.
    #[error(
        "invalid geometry: page_bytes is {page_bytes}, it must be a multiple of 64 between {PAGE_BYTES_MIN} and {PAGE_BYTES_MAX}"
    )]
    PageBytes {
        /// The size given.
        page_bytes: u32,
    },
    /// The OOB area cannot hold the flash layer's trailer, or is too large.
    #[error(
        "invalid geometry: oob_bytes is {oob_bytes}, it must be between {} and {OOB_BYTES_MAX} (the flash layer keeps {OOB_RESERVED_BYTES} bytes of it)",
        OOB_RESERVED_BYTES + 8
    )]
    OobBytes {
        /// The size given.
        oob_bytes: u32,
    },
    /// More dies than a die number (`u32`) can count.
    #[error(
        "invalid geometry: {channels} channels of {ways_per_channel} ways is more dies than a 32-bit die number counts"
    )]
    TooManyDies {
        /// Channels given.
        channels: u32,
        /// Ways per channel given.
        ways_per_channel: u32,
    },
    /// The device has more pages than page indices can address.
    #[error(
        "invalid geometry: {pages} pages is more than the {DEVICE_PAGES_MAX} a device may have"
    )]
    TooLarge {
        /// Pages the geometry describes.
        pages: u64,
    },
}

impl Geometry {
    /// Checks every dimension; a geometry must be validated before a device is built on it.
    pub fn validate(&self) -> Result<(), GeometryError> {
        for (field, value) in [
            ("channels", self.channels),
            ("ways_per_channel", self.ways_per_channel),
            ("blocks_per_die", self.blocks_per_die),
            ("pages_per_block", self.pages_per_block),
        ] {
            if value == 0 {
                return Err(GeometryError::Zero { field });
            }
        }
        if !(PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&self.page_bytes)
            || self.page_bytes % 64 != 0
        {
            return Err(GeometryError::PageBytes {
                page_bytes: self.page_bytes,
            });
        }
        if self.oob_bytes < OOB_RESERVED_BYTES + 8 || self.oob_bytes > OOB_BYTES_MAX {
            return Err(GeometryError::OobBytes {
                oob_bytes: self.oob_bytes,
            });
        }
        // Die numbers are `u32` (`dies()`, `BlockAddress::die`): a product that overflows would
        // wrap, or panic in a debug build, everywhere a die is computed.
        if self.channels.checked_mul(self.ways_per_channel).is_none() {
            return Err(GeometryError::TooManyDies {
                channels: self.channels,
                ways_per_channel: self.ways_per_channel,
            });
        }
        let pages = self.pages_total_checked();
        match pages {
            Some(pages) if pages <= DEVICE_PAGES_MAX => Ok(()),
            _ => Err(GeometryError::TooLarge {
                pages: pages.unwrap_or(u64::MAX),
            }),
        }
    }

    fn pages_total_checked(&self) -> Option<u64> {
        u64::from(self.channels)
            .checked_mul(u64::from(self.ways_per_channel))?
            .checked_mul(u64::from(self.blocks_per_die))?
            .checked_mul(u64::from(self.pages_per_block))
    }

    /// Dies in the device.
    pub fn dies(&self) -> u32 {
        self.channels * self.ways_per_channel
    }

    /// Erase blocks in the device.
    pub fn blocks_total(&self) -> u64 {
        u64::from(self.dies()) * u64::from(self.blocks_per_die)
    }

    /// Pages in the device.
    pub fn pages_total(&self) -> u64 {
        self.blocks_total() * u64::from(self.pages_per_block)
    }

    /// Payload bytes in the device (OOB excluded).
    pub fn capacity_bytes(&self) -> u64 {
        self.pages_total() * u64::from(self.page_bytes)
    }

    /// Payload bytes of one erase block.
    pub fn block_bytes(&self) -> u64 {
        u64::from(self.pages_per_block) * u64::from(self.page_bytes)
    }

    /// OOB bytes per page available to the layers above the flash layer.
    pub fn oob_user_bytes(&self) -> u32 {
        self.oob_bytes - OOB_RESERVED_BYTES
    }

    /// The channel a die sits on.
    pub fn channel_of(&self, die: u32) -> u32 {
        die % self.channels
    }

    /// The way (position on its channel) of a die.
    pub fn way_of(&self, die: u32) -> u32 {
        die / self.channels
    }

    /// Device-wide index of a block, `die * blocks_per_die + block`.
    pub fn block_index(&self, block: BlockAddress) -> u64 {
        u64::from(block.die) * u64::from(self.blocks_per_die) + u64::from(block.block)
    }

    /// The block with a device-wide index. REQUIRES: `index < blocks_total()`.
    pub fn block_at(&self, index: u64) -> BlockAddress {
        debug_assert!(index < self.blocks_total());
        BlockAddress {
            die: (index / u64::from(self.blocks_per_die)) as u32,
            block: (index % u64::from(self.blocks_per_die)) as u32,
        }
    }

    /// Device-wide index of a page, `block_index * pages_per_block + page`.
    pub fn page_index(&self, page: PageAddress) -> u64 {
        self.block_index(page.block()) * u64::from(self.pages_per_block) + u64::from(page.page)
    }

    /// The page with a device-wide index. REQUIRES: `index < pages_total()`.
    pub fn page_at(&self, index: u64) -> PageAddress {
        debug_assert!(index < self.pages_total());
        let block = self.block_at(index / u64::from(self.pages_per_block));
        PageAddress {
            die: block.die,
            block: block.block,
            page: (index % u64::from(self.pages_per_block)) as u32,
        }
    }

    /// Whether a block address names a block of this device.
    pub fn contains_block(&self, block: BlockAddress) -> bool {
        block.die < self.dies() && block.block < self.blocks_per_die
    }

    /// Whether a page address names a page of this device.
    pub fn contains_page(&self, page: PageAddress) -> bool {
        self.contains_block(page.block()) && page.page < self.pages_per_block
    }
}

impl fmt::Display for Geometry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let capacity = self.capacity_bytes() as f64;
        let (amount, unit) = if capacity >= f64::from(1u32 << 30) {
            (capacity / f64::from(1u32 << 30), "GiB")
        } else if capacity >= f64::from(1u32 << 20) {
            (capacity / f64::from(1u32 << 20), "MiB")
        } else {
            (capacity / 1024.0, "KiB")
        };
        write!(
            f,
            "{} channels x {} ways x {} blocks x {} pages x {} B (+{} B OOB) = {:.2} {unit}",
            self.channels,
            self.ways_per_channel,
            self.blocks_per_die,
            self.pages_per_block,
            self.page_bytes,
            self.oob_bytes,
            amount
        )
    }
}

/// The address of one erase block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockAddress {
    /// Die number (see the module docs for how dies map to channels).
    pub die: u32,
    /// Block number within the die.
    pub block: u32,
}

impl BlockAddress {
    /// The page `page` of this block.
    pub fn page(self, page: u32) -> PageAddress {
        PageAddress {
            die: self.die,
            block: self.block,
            page,
        }
    }
}

impl fmt::Display for BlockAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "die {} block {}", self.die, self.block)
    }
}

/// The address of one physical page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageAddress {
    /// Die number.
    pub die: u32,
    /// Block number within the die.
    pub block: u32,
    /// Page number within the block.
    pub page: u32,
}

impl PageAddress {
    /// The block this page belongs to.
    pub fn block(self) -> BlockAddress {
        BlockAddress {
            die: self.die,
            block: self.block,
        }
    }
}

impl fmt::Display for PageAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "die {} block {} page {}",
            self.die, self.block, self.page
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Geometry {
        Geometry {
            channels: 2,
            ways_per_channel: 3,
            blocks_per_die: 5,
            pages_per_block: 7,
            page_bytes: 512,
            oob_bytes: 64,
        }
    }

    #[test]
    fn geometry_page_index_round_trips() {
        let geometry = small();
        geometry.validate().expect("valid");
        for index in 0..geometry.pages_total() {
            let page = geometry.page_at(index);
            assert!(geometry.contains_page(page));
            assert_eq!(geometry.page_index(page), index);
        }
    }

    #[test]
    fn geometry_dies_alternate_channels() {
        let geometry = small();
        assert_eq!(geometry.channel_of(0), 0);
        assert_eq!(geometry.channel_of(1), 1);
        assert_eq!(geometry.channel_of(2), 0);
        assert_eq!(geometry.way_of(5), 2);
    }

    #[test]
    fn geometry_rejects_zero_and_bad_sizes() {
        let mut geometry = small();
        geometry.ways_per_channel = 0;
        assert_eq!(
            geometry.validate(),
            Err(GeometryError::Zero {
                field: "ways_per_channel"
            })
        );
        let mut geometry = small();
        geometry.page_bytes = 500;
        assert!(matches!(
            geometry.validate(),
            Err(GeometryError::PageBytes { .. })
        ));
        let mut geometry = small();
        geometry.oob_bytes = 8;
        assert!(matches!(
            geometry.validate(),
            Err(GeometryError::OobBytes { .. })
        ));
        let mut geometry = small();
        geometry.blocks_per_die = u32::MAX;
        geometry.pages_per_block = u32::MAX;
        assert!(matches!(
            geometry.validate(),
            Err(GeometryError::TooLarge { .. })
        ));
        // Every message is one line.
        assert!(!GeometryError::Zero { field: "channels" }
            .to_string()
            .contains('\n'));
    }
}
