//! The opaque list cursor: base64 of `o:<offset>` into the caller-visible list.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::model::{ErrorData, PaginatedRequestParams};

/// The cursor of the page starting at `offset`.
pub(crate) fn encode_cursor(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("o:{offset}"))
}

/// The offset a cursor names.
pub(crate) fn decode_cursor(cursor: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    std::str::from_utf8(&bytes)
        .ok()?
        .strip_prefix("o:")?
        .parse()
        .ok()
}

/// The offset the request's cursor names (0 without one).
///
/// # Errors
/// -32602 for a cursor that is not ours.
pub(crate) fn offset(request: Option<PaginatedRequestParams>) -> Result<usize, ErrorData> {
    match request.and_then(|r| r.cursor) {
        None => Ok(0),
        Some(cursor) => decode_cursor(&cursor)
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None)),
    }
}

/// One page of `items` from the request's cursor, and the cursor of the next page.
///
/// # Errors
/// -32602 for a cursor that is not ours or points past the end.
pub(crate) fn paginate<T>(
    mut items: Vec<T>,
    request: Option<PaginatedRequestParams>,
    page_size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let offset = match request.and_then(|r| r.cursor) {
        None => 0,
        Some(cursor) => decode_cursor(&cursor)
            .filter(|o| *o <= items.len())
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None))?,
    };
    let end = (offset + page_size).min(items.len());
    let next = (end < items.len()).then(|| encode_cursor(end));
    items.truncate(end);
    Ok((items.split_off(offset), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_the_cursor() {
        let items: Vec<u32> = (0..5).collect();
        let (page, next) = paginate(items.clone(), None, 2).unwrap();
        assert_eq!(page, [0, 1]);
        let cursor = next.unwrap();
        let request =
            |c: &str| Some(PaginatedRequestParams::default().with_cursor(Some(c.to_owned())));
        let (page, next) = paginate(items.clone(), request(&cursor), 2).unwrap();
        assert_eq!(page, [2, 3]);
        let (page, next) = paginate(items.clone(), request(&next.unwrap()), 2).unwrap();
        assert_eq!((page, next), (vec![4], None));
        assert!(paginate(items.clone(), request("bogus"), 2).is_err());
        assert!(paginate(items, request(&encode_cursor(9)), 2).is_err());
    }

    #[test]
    fn cursor_round_trip() {
        assert_eq!(decode_cursor(&encode_cursor(1000)), Some(1000));
        assert_eq!(decode_cursor("not-a-cursor"), None);
        assert_eq!(decode_cursor(""), None);
    }
}
