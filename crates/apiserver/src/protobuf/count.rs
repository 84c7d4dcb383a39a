//! Counting what a protobuf body holds before transcoding it (see [`crate::shape`]): the wire
//! is walked with the schema, field by field, building nothing, and the walk stops at the
//! first bound passed. An empty embedded message is two bytes on the wire, so a 3 MiB body can
//! carry a million and a half of them.

use super::schema::schema;
use super::transcode::{FIELDS_V1, INT_OR_STRING, MICRO_TIME, QUANTITY, RAW_EXTENSION, TIME};
use super::wire::{self, FIXED32, FIXED64, LEN, VARINT};
use crate::shape::{self, Budget};

/// Each field of one message as (number, length-delimited bytes if any), read lazily; stops at
/// the first malformed byte (the transcoder reports it).
fn each_field(b: &[u8], mut f: impl FnMut(u64, Option<&[u8]>) -> bool) {
    let mut i = 0;
    while i < b.len() {
        let Ok(key) = wire::read_varint(b, &mut i) else { return };
        let len = match (key & 7) as u8 {
            VARINT => match wire::read_varint(b, &mut i) {
                Ok(_) => None,
                Err(_) => return,
            },
            FIXED64 => Some(8),
            FIXED32 => Some(4),
            LEN => match wire::read_varint(b, &mut i).ok().and_then(|n| usize::try_from(n).ok()) {
                Some(n) => Some(n),
                None => return,
            },
            _ => return,
        };
        let bytes = match len {
            None => None,
            Some(n) => {
                let Some(end) = i.checked_add(n).filter(|e| *e <= b.len()) else { return };
                let s = &b[i..end];
                i = end;
                ((key & 7) as u8 == LEN).then_some(s)
            }
        };
        if !f(key >> 3, bytes) {
            return;
        }
    }
}

/// Counts the message of type `ty` in `bytes` (itself one object) into `budget`; false once a
/// bound is passed.
pub(super) fn message(ty: &str, bytes: &[u8], budget: &mut Budget) -> bool {
    if !budget.object() {
        return false;
    }
    let Some(fields) = schema().get(ty) else { return true };
    let mut ok = true;
    each_field(bytes, |num, raw| {
        let Some(f) = fields.iter().find(|f| u64::from(f.num) == num) else { return true };
        ok = match (f.kind.as_str(), raw) {
            ("message", Some(b)) if f.map => {
                // A map entry: the key, and the value (field 2) when it is a message.
                let mut inner = budget.value();
                each_field(b, |n, v| {
                    if let (2, Some(v)) = (n, v) {
                        inner = inner && value(&f.ty, v, budget);
                    }
                    inner
                });
                inner
            }
            ("message", Some(b)) => value(&f.ty, b, budget),
            _ => budget.value(),
        };
        ok
    });
    ok
}

/// One message-typed value: the types whose JSON is a scalar count as one value, embedded JSON
/// is scanned, others are messages.
fn value(ty: &str, b: &[u8], budget: &mut Budget) -> bool {
    match ty {
        TIME | MICRO_TIME | QUANTITY | INT_OR_STRING => budget.value(),
        RAW_EXTENSION | FIELDS_V1 => {
            let mut ok = true;
            each_field(b, |n, raw| {
                if let (1, Some(json)) = (n, raw) {
                    ok = shape::count_json(json, budget);
                }
                ok
            });
            ok
        }
        _ => message(ty, b, budget),
    }
}
