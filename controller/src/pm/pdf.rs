//! A shared PDF's text, for the PM: extracted once, when the file is fetched, and kept as
//! the file's text (the model and the Coder read text; nobody needs the PDF's bytes).
//!
//! A PDF is data from outside, and a parser can be made to loop or panic on a hostile one:
//! the extraction runs off the runtime (`spawn_blocking`), on at most
//! `attachments.maxMB` of input (the fetch's limit), and is given up after
//! [`EXTRACT_TIMEOUT`]; a panic in the parser is a refusal, not a crash. A PDF without
//! text (a scan) is refused with that reason.

use std::time::Duration;

/// How long extracting one PDF's text may take.
pub const EXTRACT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a PDF's text could not be read; the text is what the thread is told.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PdfRefused {
    #[error("it could not be read as a PDF")]
    Unreadable,
    #[error("it holds no text (a scan?)")]
    NoText,
    #[error("reading its text took longer than {0:?}")]
    TooSlow(Duration),
}

/// The text of the PDF `bytes`.
pub async fn text_of(bytes: Vec<u8>) -> Result<String, PdfRefused> {
    let extract = tokio::task::spawn_blocking(move || pdf_extract::extract_text_from_mem(&bytes));
    let text = match tokio::time::timeout(EXTRACT_TIMEOUT, extract).await {
        Err(_) => return Err(PdfRefused::TooSlow(EXTRACT_TIMEOUT)),
        // The parser panicked (the join error says so) or refused the file.
        Ok(Err(_)) | Ok(Ok(Err(_))) => return Err(PdfRefused::Unreadable),
        Ok(Ok(Ok(text))) => text,
    };
    if text.trim().is_empty() {
        return Err(PdfRefused::NoText);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_is_not_a_pdf_is_refused_not_a_crash() {
        assert_eq!(
            text_of(b"%PDF-1.4\n1 0 obj << /Kids [ 9 0 R".to_vec()).await,
            Err(PdfRefused::Unreadable)
        );
        assert_eq!(text_of(Vec::new()).await, Err(PdfRefused::Unreadable));
    }
}
