//! The protobuf wire format at its lowest level: varints, field keys and the four wire types
//! Kubernetes messages use (varint, 64-bit, length-delimited, 32-bit).

/// Wire type of varint fields.
pub const VARINT: u8 = 0;
/// Wire type of 64-bit fields (double).
pub const FIXED64: u8 = 1;
/// Wire type of length-delimited fields (strings, bytes, messages, packed repeated).
pub const LEN: u8 = 2;
/// Wire type of 32-bit fields (float).
pub const FIXED32: u8 = 5;

/// One field occurrence as read from the wire.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Raw<'a> {
    /// A varint.
    Varint(u64),
    /// Eight little-endian bytes.
    Fixed64(u64),
    /// Four little-endian bytes.
    Fixed32(u32),
    /// Length-delimited bytes.
    Len(&'a [u8]),
}

/// Why bytes are not a protobuf message.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The input ends inside a value.
    #[error("truncated message")]
    Truncated,
    /// A varint longer than ten bytes.
    #[error("varint too long")]
    VarintTooLong,
    /// A wire type Kubernetes messages never use (groups) or that does not exist.
    #[error("unsupported wire type {0}")]
    WireType(u8),
    /// Field number zero.
    #[error("invalid field number 0")]
    FieldZero,
}

/// Reads a varint at `*i`, advancing it.
pub fn read_varint(b: &[u8], i: &mut usize) -> Result<u64, WireError> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *b.get(*i).ok_or(WireError::Truncated)?;
        *i += 1;
        if shift < 64 {
            v |= u64::from(byte & 0x7f) << shift;
        }
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(WireError::VarintTooLong)
}

fn take<'a>(b: &'a [u8], i: &mut usize, n: usize) -> Result<&'a [u8], WireError> {
    let end = i.checked_add(n).filter(|e| *e <= b.len()).ok_or(WireError::Truncated)?;
    let s = &b[*i..end];
    *i = end;
    Ok(s)
}

/// Every field of one message, in wire order: (field number, value).
pub fn fields(b: &[u8]) -> Result<Vec<(u64, Raw<'_>)>, WireError> {
    let (mut i, mut out) = (0, Vec::new());
    while i < b.len() {
        let key = read_varint(b, &mut i)?;
        let num = key >> 3;
        if num == 0 {
            return Err(WireError::FieldZero);
        }
        let raw = match (key & 7) as u8 {
            VARINT => Raw::Varint(read_varint(b, &mut i)?),
            FIXED64 => Raw::Fixed64(u64::from_le_bytes(take(b, &mut i, 8)?.try_into().unwrap_or_default())),
            FIXED32 => Raw::Fixed32(u32::from_le_bytes(take(b, &mut i, 4)?.try_into().unwrap_or_default())),
            LEN => {
                let n = usize::try_from(read_varint(b, &mut i)?).map_err(|_| WireError::Truncated)?;
                Raw::Len(take(b, &mut i, n)?)
            }
            t => return Err(WireError::WireType(t)),
        };
        out.push((num, raw));
    }
    Ok(out)
}

/// The last length-delimited occurrence of field `num` (the one that wins for a scalar).
pub fn last_len<'a>(fields: &[(u64, Raw<'a>)], num: u64) -> Option<&'a [u8]> {
    fields.iter().rev().find_map(|(k, r)| match r {
        Raw::Len(b) if *k == num => Some(*b),
        _ => None,
    })
}

/// Appends a varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a field key.
pub fn put_key(out: &mut Vec<u8>, num: u32, wire: u8) {
    put_varint(out, (u64::from(num) << 3) | u64::from(wire));
}

/// Appends a length-delimited field.
pub fn put_len(out: &mut Vec<u8>, num: u32, bytes: &[u8]) {
    put_key(out, num, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a varint field.
pub fn put_varint_field(out: &mut Vec<u8>, num: u32, v: u64) {
    put_key(out, num, VARINT);
    put_varint(out, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_including_negative_int64() {
        for v in [0u64, 1, 127, 128, 300, u64::MAX, (-1i64) as u64] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut i = 0;
            assert_eq!(read_varint(&b, &mut i).unwrap(), v);
            assert_eq!(i, b.len());
        }
        let mut b = Vec::new();
        put_varint(&mut b, (-1i64) as u64);
        assert_eq!(b.len(), 10);
    }

    #[test]
    fn fields_are_read_in_wire_order_and_truncation_is_an_error() {
        let mut b = Vec::new();
        put_len(&mut b, 2, b"ab");
        put_varint_field(&mut b, 1, 5);
        assert_eq!(fields(&b).unwrap(), vec![(2, Raw::Len(b"ab")), (1, Raw::Varint(5))]);
        assert!(matches!(fields(&b[..3]), Err(WireError::Truncated)));
        assert!(matches!(fields(&[0x0b]), Err(WireError::WireType(3))));
    }
}
