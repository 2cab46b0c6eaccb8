//! Images from results: shown only as `data:` URLs of the raster types a browser cannot run
//! code in (PNG, JPEG, GIF, WebP), and only when the bytes are what the declared type says
//! (an SVG, or anything else, sent as `image/png` is a lie and is not shown). Everything
//! else becomes a note naming the declared type. Never SVG: it is a document that can carry
//! script and links.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use maud::{Markup, html};

/// The allowed types and how their bytes begin.
fn matches(mime: &str, bytes: &[u8]) -> Option<bool> {
    let ok = match mime {
        "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => bytes.starts_with(&[0xFF, 0xD8, 0xFF]),
        "image/gif" => bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a"),
        "image/webp" => bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP",
        _ => return None,
    };
    Some(ok)
}

/// Why an image is not shown, or `None` when it may be.
fn refusal(data: &str, mime: &str) -> Option<&'static str> {
    let Ok(bytes) = STANDARD.decode(data.trim()) else {
        return Some("its data is not base64");
    };
    match matches(&mime.to_ascii_lowercase(), &bytes) {
        None => Some("only PNG, JPEG, GIF and WebP images are shown"),
        Some(false) => Some("its bytes are not of the type it declares"),
        Some(true) => None,
    }
}

/// An image content block (`data` base64, declared `mime`): the picture, or a note.
pub(crate) fn image(data: &str, mime: &str) -> Markup {
    let mime_lower = mime.to_ascii_lowercase();
    match refusal(data, mime) {
        None => html! {
            img.result-image src=(format!("data:{mime_lower};base64,{}", data.trim())) alt=(format!("Image from the result ({mime_lower})"));
        },
        Some(why) => html! {
            p.note { "An image of type " code { (mime) } " is not shown: " (why) "." }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn only_raster_images_whose_bytes_match_their_type_are_shown() {
        let png = STANDARD.encode(PNG);
        let svg = STANDARD.encode(b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>");
        let shown = image(&png, "image/png").into_string();
        assert!(shown.starts_with("<img"), "{shown}");
        assert!(shown.contains("src=\"data:image/png;base64,"), "{shown}");
        for (data, mime) in [
            (&svg, "image/svg+xml"),
            (&svg, "image/png"),
            (&png, "image/jpeg"),
            (&png, "text/html"),
            (&"not base64!".to_owned(), "image/png"),
        ] {
            let note = image(data, mime).into_string();
            assert!(!note.contains("<img"), "{mime}: {note}");
            assert!(!note.contains("<svg"), "{mime}: {note}");
            assert!(note.contains("is not shown"), "{mime}: {note}");
        }
    }
}
