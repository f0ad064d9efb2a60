//! The Artist's drawings (`artist_drawings`): proposed with the Artist's answer, drawn,
//! used or cancelled, each change recorded with what the thread is told ([`DrawingChange`]
//! through [`super::Store::commit`]) and guarded by the stage it leaves, so a click or a
//! word answered twice changes nothing the second time.

use base64::Engine as _;
use sqlx::{AnyConnection, Row};

use super::bind::BindThread;
use super::{Store, StoreError, now};
use crate::domain::{Drawing, DrawingStage, ThreadKey};

/// A change to a thread's drawings.
#[derive(Clone, Copy, Debug)]
pub enum DrawingChange<'a> {
    /// A new proposal, numbered `number` ([`Store::next_drawing_number`]); the thread's
    /// open ones are cancelled.
    Propose {
        thread: &'a ThreadKey,
        number: i64,
        prompt: &'a str,
        path: &'a str,
        size: &'a str,
        base: Option<&'a str>,
    },
    /// Drawing `number` drawn (or drawn again): its image. Only from `proposed` or `drawn`.
    Drawn {
        thread: &'a ThreadKey,
        number: i64,
        png: &'a [u8],
    },
    /// Drawing `number` committed at `path`. Only from `drawn`.
    Used {
        thread: &'a ThreadKey,
        number: i64,
        path: &'a str,
    },
    /// Drawing `number` cancelled. Only from `proposed` or `drawn`.
    Cancelled { thread: &'a ThreadKey, number: i64 },
}

/// Applies `change`; false (the whole commit is not made) when its guard fails.
pub(super) async fn apply(
    conn: &mut AnyConnection,
    change: &DrawingChange<'_>,
) -> Result<bool, StoreError> {
    match *change {
        DrawingChange::Propose {
            thread,
            number,
            prompt,
            path,
            size,
            base,
        } => {
            sqlx::query(
                "UPDATE artist_drawings SET stage = 'cancelled' \
                 WHERE channel_id = $1 AND thread_ts = $2 AND stage IN ('proposed', 'drawn')",
            )
            .bind_thread(thread)
            .execute(&mut *conn)
            .await?;
            let sql = match base {
                Some(_) => {
                    "INSERT INTO artist_drawings (channel_id, thread_ts, number, prompt, path, size, stage, created_at, base) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'proposed', $7, $8)"
                }
                None => {
                    "INSERT INTO artist_drawings (channel_id, thread_ts, number, prompt, path, size, stage, created_at, base) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'proposed', $7, NULL)"
                }
            };
            let query = sqlx::query(sql)
                .bind_thread(thread)
                .bind(number)
                .bind(prompt)
                .bind(path)
                .bind(size)
                .bind(now());
            match base {
                Some(base) => query.bind(base),
                None => query,
            }
            .execute(&mut *conn)
            .await?;
            Ok(true)
        }
        DrawingChange::Drawn {
            thread,
            number,
            png,
        } => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(png);
            let changed = sqlx::query(
                "UPDATE artist_drawings SET stage = 'drawn', image = $1 \
                 WHERE channel_id = $2 AND thread_ts = $3 AND number = $4 AND stage IN ('proposed', 'drawn')",
            )
            .bind(encoded)
            .bind_thread(thread)
            .bind(number)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            Ok(changed == 1)
        }
        DrawingChange::Used {
            thread,
            number,
            path,
        } => {
            let changed = sqlx::query(
                "UPDATE artist_drawings SET stage = 'used', path = $1 \
                 WHERE channel_id = $2 AND thread_ts = $3 AND number = $4 AND stage = 'drawn'",
            )
            .bind(path)
            .bind_thread(thread)
            .bind(number)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            Ok(changed == 1)
        }
        DrawingChange::Cancelled { thread, number } => {
            let changed = sqlx::query(
                "UPDATE artist_drawings SET stage = 'cancelled' \
                 WHERE channel_id = $1 AND thread_ts = $2 AND number = $3 AND stage IN ('proposed', 'drawn')",
            )
            .bind_thread(thread)
            .bind(number)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            Ok(changed == 1)
        }
    }
}

impl Store {
    /// The number the thread's next drawing takes.
    pub async fn next_drawing_number(&self, thread: &ThreadKey) -> Result<i64, StoreError> {
        Ok(sqlx::query(
            "SELECT COALESCE(MAX(number), 0) + 1 AS next FROM artist_drawings \
             WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_one(&self.pool)
        .await?
        .try_get("next")?)
    }

    /// The thread's open drawing (proposed or drawn), if it has one: its latest.
    pub async fn open_drawing(&self, thread: &ThreadKey) -> Result<Option<Drawing>, StoreError> {
        let row = sqlx::query(
            "SELECT number, prompt, path, size, base, stage FROM artist_drawings \
             WHERE channel_id = $1 AND thread_ts = $2 AND stage IN ('proposed', 'drawn') \
             ORDER BY number DESC LIMIT 1",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let number: i64 = row.try_get("number")?;
        let stage: String = row.try_get("stage")?;
        let stage = DrawingStage::parse(&stage).ok_or_else(|| StoreError::UnknownValue {
            column: "artist_drawings.stage",
            row: format!("{thread} {number}"),
            value: stage.clone(),
        })?;
        Ok(Some(Drawing {
            number,
            prompt: row.try_get("prompt")?,
            path: row.try_get("path")?,
            size: row.try_get("size")?,
            base: row.try_get("base")?,
            stage,
        }))
    }

    /// The image of the thread's drawing `number`, once drawn.
    pub async fn drawing_image(
        &self,
        thread: &ThreadKey,
        number: i64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query(
            "SELECT image FROM artist_drawings WHERE channel_id = $1 AND thread_ts = $2 AND number = $3",
        )
        .bind_thread(thread)
        .bind(number)
        .fetch_optional(&self.pool)
        .await?;
        let Some(encoded) = row
            .map(|r| r.try_get::<Option<String>, _>("image"))
            .transpose()?
            .flatten()
        else {
            return Ok(None);
        };
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map(Some)
            .map_err(|e| StoreError::UnknownValue {
                column: "artist_drawings.image",
                row: format!("{thread} {number}"),
                value: format!("not base64: {e}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::DrawingChange;
    use crate::domain::{DrawingStage, ThreadKey};
    use crate::store::{Change, Store};

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    async fn drawings_move_through_their_stages_once(s: &Store) {
        let t = thread();
        let propose = |number, prompt: &'static str, base| {
            Change::Drawing(DrawingChange::Propose {
                thread: &t,
                number,
                prompt,
                path: "assets/a.png",
                size: "1024x1024",
                base,
            })
        };
        assert_eq!(s.next_drawing_number(&t).await.unwrap(), 1);
        assert!(s.commit(&[propose(1, "a fox", None)], &[]).await.unwrap());
        assert_eq!(s.next_drawing_number(&t).await.unwrap(), 2);
        assert!(
            s.commit(&[propose(2, "a cat", Some("1.2-0.png"))], &[])
                .await
                .unwrap()
        );
        let open = s.open_drawing(&t).await.unwrap().unwrap();
        assert_eq!((open.number, open.prompt.as_str()), (2, "a cat"));
        assert_eq!(open.base.as_deref(), Some("1.2-0.png"));
        assert_eq!(open.stage, DrawingStage::Proposed);
        // Not drawn yet: nothing to use.
        let used = Change::Drawing(DrawingChange::Used {
            thread: &t,
            number: 2,
            path: "docs/cat.png",
        });
        assert!(!s.commit(&[used], &[]).await.unwrap());
        let png = [0x89, b'P', b'N', b'G', 0, 1, 2];
        let drawn = Change::Drawing(DrawingChange::Drawn {
            thread: &t,
            number: 2,
            png: &png,
        });
        assert!(s.commit(&[drawn], &[]).await.unwrap());
        assert_eq!(s.drawing_image(&t, 2).await.unwrap().unwrap(), png);
        assert!(s.commit(&[used], &[]).await.unwrap());
        // Used once.
        assert!(!s.commit(&[used], &[]).await.unwrap());
        assert!(s.open_drawing(&t).await.unwrap().is_none());
        // The first proposal was replaced by the second.
        let cancel = Change::Drawing(DrawingChange::Cancelled {
            thread: &t,
            number: 1,
        });
        assert!(!s.commit(&[cancel], &[]).await.unwrap());
    }

    crate::store::testing::on_both_backends!(drawings_move_through_their_stages_once,);
}
