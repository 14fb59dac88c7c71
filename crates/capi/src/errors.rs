//! The API's result code for each way the device refuses a command.

use kvssd_device::DeviceError;

use crate::ffi::*;

/// The `kvs_result` a device error is reported as. Argument checks happen before the device is
/// asked, so most of these are reached only by what the device alone knows (presence, capacity).
pub fn result_of(error: &DeviceError) -> KvsResult {
    match error {
        DeviceError::KeyEmpty | DeviceError::KeyTooLong { .. } => KVS_ERR_KEY_LENGTH_INVALID,
        DeviceError::ValueTooLarge { .. } => KVS_ERR_VALUE_LENGTH_INVALID,
        DeviceError::NamespaceUnknown(_) => KVS_ERR_KS_NOT_EXIST,
        DeviceError::NamespaceNameInvalid(_) => KVS_ERR_KS_NAME,
        DeviceError::NamespaceNameTaken(_) => KVS_ERR_KS_EXIST,
        DeviceError::KeyMissing => KVS_ERR_KEY_NOT_EXIST,
        DeviceError::KeyExists => KVS_ERR_VALUE_UPDATE_NOT_ALLOWED,
        DeviceError::QuotaExceeded { .. } | DeviceError::CapacityExceeded(_) => KVS_ERR_KS_CAPACITY,
        DeviceError::RangeOutsideValue { .. } => KVS_ERR_VALUE_OFFSET_INVALID,
        DeviceError::IteratorsExhausted { .. } => KVS_ERR_ITERATOR_MAX,
        DeviceError::IteratorsUnsupported(_) => KVS_ERR_OPTION_INVALID,
        DeviceError::IteratorUnknown(_) | DeviceError::IteratorNamespaceDeleted(_) => {
            KVS_ERR_ITERATOR_NOT_EXIST
        }
        DeviceError::BatchOperation { source, .. } => result_of(source),
        // OpenMPDK answers a full key-space table with an I/O error too.
        _ => KVS_ERR_SYS_IO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvssd_device::NamespaceId;

    #[test]
    fn errors_map_to_the_codes_the_spec_names() {
        assert_eq!(result_of(&DeviceError::KeyMissing), KVS_ERR_KEY_NOT_EXIST);
        assert_eq!(
            result_of(&DeviceError::KeyExists),
            KVS_ERR_VALUE_UPDATE_NOT_ALLOWED
        );
        assert_eq!(
            result_of(&DeviceError::CapacityExceeded("full")),
            KVS_ERR_KS_CAPACITY
        );
        assert_eq!(
            result_of(&DeviceError::NamespaceUnknown(NamespaceId(3))),
            KVS_ERR_KS_NOT_EXIST
        );
        assert_eq!(
            result_of(&DeviceError::BatchOperation {
                index: 0,
                source: Box::new(DeviceError::KeyMissing)
            }),
            KVS_ERR_KEY_NOT_EXIST
        );
        assert_eq!(result_of(&DeviceError::Poisoned), KVS_ERR_SYS_IO);
    }
}
