//! Files shared on messages (`message_files`): stored with their message at intake, then
//! marked stored (with the name the controller gave their bytes) or refused (with the
//! reason the thread was told) once the thread's task fetched them.

use sqlx::Row;

use super::{Store, StoreError};
use crate::domain::{FileState, IncomingMessage, SharedFile, StoredFile, ThreadKey};
use crate::store::bind::BindThread;

/// Stores `files` as `msg`'s, pending, inside the transaction that stores `msg`.
pub(super) async fn insert(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    msg: &IncomingMessage,
    files: &[SharedFile],
) -> Result<(), StoreError> {
    for (position, file) in files.iter().enumerate() {
        sqlx::query(
            "INSERT INTO message_files (channel_id, message_ts, position, thread_ts, file_id, name, mimetype, url) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&msg.channel)
        .bind(&msg.ts)
        .bind(i64::try_from(position).unwrap_or(i64::MAX))
        .bind(&msg.thread_ts)
        .bind(&file.id)
        .bind(&file.name)
        .bind(&file.mimetype)
        .bind(&file.url)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Records what became of the file at `position` on `msg`, on `conn` (a commit's
/// transaction, or the pool's).
pub(super) async fn set_state(
    conn: &mut sqlx::AnyConnection,
    msg: &IncomingMessage,
    position: u32,
    state: &FileState,
) -> Result<(), StoreError> {
    let (name, stored_as, note) = match state {
        FileState::Pending => ("pending", None, None),
        FileState::Stored(stored_as) => ("stored", Some(stored_as.as_str()), None),
        FileState::Refused(note) => ("refused", None, Some(note.as_str())),
        FileState::Transcribed => ("transcribed", None, None),
    };
    sqlx::query(
        "UPDATE message_files SET state = $1, stored_as = $2, note = $3 \
         WHERE channel_id = $4 AND message_ts = $5 AND position = $6",
    )
    .bind(name)
    .bind(stored_as)
    .bind(note)
    .bind(&msg.channel)
    .bind(&msg.ts)
    .bind(i64::from(position))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Makes `text` `msg`'s text from now on (a voice note's transcript), on `conn`.
pub(super) async fn set_text(
    conn: &mut sqlx::AnyConnection,
    msg: &IncomingMessage,
    text: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE messages SET text = $1 WHERE channel_id = $2 AND ts = $3")
        .bind(text)
        .bind(&msg.channel)
        .bind(&msg.ts)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// A file of a thread kept on disk: its shared name, its type, and the name it is stored
/// under in the thread's attachments directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptFile {
    pub name: String,
    pub mimetype: String,
    pub stored_as: String,
}

impl Store {
    /// The files of `thread` kept on disk, oldest message first, in order on each message.
    pub async fn thread_kept_files(&self, thread: &ThreadKey) -> Result<Vec<KeptFile>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, mimetype, stored_as FROM message_files \
             WHERE channel_id = $1 AND thread_ts = $2 AND state = 'stored' AND stored_as IS NOT NULL \
             ORDER BY message_ts, position",
        )
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|row| {
                Ok(KeptFile {
                    name: row.try_get("name")?,
                    mimetype: row.try_get("mimetype")?,
                    stored_as: row.try_get("stored_as")?,
                })
            })
            .collect()
    }

    /// The files shared on `msg`, in order, with what became of each.
    pub async fn message_files(
        &self,
        msg: &IncomingMessage,
    ) -> Result<Vec<StoredFile>, StoreError> {
        let rows = sqlx::query(
            "SELECT position, file_id, name, mimetype, url, state, stored_as, note FROM message_files \
             WHERE channel_id = $1 AND message_ts = $2 ORDER BY position",
        )
        .bind(&msg.channel)
        .bind(&msg.ts)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|row| {
                let state: String = row.try_get("state")?;
                let state = match state.as_str() {
                    "stored" => FileState::Stored(
                        row.try_get::<Option<String>, _>("stored_as")?
                            .unwrap_or_default(),
                    ),
                    "refused" => FileState::Refused(
                        row.try_get::<Option<String>, _>("note")?
                            .unwrap_or_default(),
                    ),
                    "pending" => FileState::Pending,
                    "transcribed" => FileState::Transcribed,
                    other => {
                        return Err(StoreError::UnknownValue {
                            column: "message_files.state",
                            row: format!("{} {}", msg.ts, row.try_get::<i64, _>("position")?),
                            value: other.to_owned(),
                        });
                    }
                };
                Ok(StoredFile {
                    position: u32::try_from(row.try_get::<i64, _>("position")?).unwrap_or(u32::MAX),
                    file: SharedFile {
                        id: row.try_get("file_id")?,
                        name: row.try_get("name")?,
                        mimetype: row.try_get("mimetype")?,
                        url: row.try_get("url")?,
                    },
                    state,
                })
            })
            .collect()
    }

    /// Records what became of the file at `position` on `msg`.
    pub async fn set_file_state(
        &self,
        msg: &IncomingMessage,
        position: u32,
        state: &FileState,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        set_state(&mut conn, msg, position, state).await
    }

    /// Forgets the files of `thread` (at close, when their bytes are deleted).
    pub async fn forget_thread_files(&self, thread: &ThreadKey) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM message_files WHERE channel_id = $1 AND thread_ts = $2")
            .bind_thread(thread)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::domain::{FileState, IncomingMessage, SharedFile};
    use crate::store::Store;

    fn msg(ts: &str) -> IncomingMessage {
        crate::store::testing::message("1.1", ts, "")
    }

    fn file(id: &str) -> SharedFile {
        SharedFile {
            id: id.into(),
            name: format!("{id}.log"),
            mimetype: "text/plain".into(),
            url: format!("https://files.slack.com/{id}"),
        }
    }

    async fn files_are_stored_once_with_their_message(s: &Store) {
        let m = msg("1.1");
        assert!(
            s.record_message_with_files(&m, &[file("F1"), file("F2")])
                .await
                .unwrap()
        );
        // A redelivery stores neither the message nor its files again.
        assert!(
            !s.record_message_with_files(&m, &[file("F1"), file("F2")])
                .await
                .unwrap()
        );
        let stored = s.message_files(&m).await.unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!((stored[1].position, &stored[1].file), (1, &file("F2")));
        assert_eq!(stored[0].state, FileState::Pending);
        s.set_file_state(&m, 0, &FileState::Stored("0.log".into()))
            .await
            .unwrap();
        s.set_file_state(&m, 1, &FileState::Refused("too big".into()))
            .await
            .unwrap();
        let states: Vec<_> = s
            .message_files(&m)
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.state)
            .collect();
        assert_eq!(
            states,
            [
                FileState::Stored("0.log".into()),
                FileState::Refused("too big".into())
            ]
        );
        assert!(s.message_files(&msg("1.2")).await.unwrap().is_empty());
        s.forget_thread_files(&m.thread()).await.unwrap();
        assert!(s.message_files(&m).await.unwrap().is_empty());
    }

    async fn a_heard_voice_note_changes_the_text_and_its_state_at_once(s: &Store) {
        let m = msg("2.1");
        let clip = SharedFile {
            mimetype: "audio/webm".into(),
            ..file("F9")
        };
        assert!(s.record_message_with_files(&m, &[clip]).await.unwrap());
        let files = [(0, FileState::Transcribed)];
        let changes = [crate::store::Change::Heard {
            msg: &m,
            text: "fix the login",
            files: &files,
        }];
        assert!(s.commit(&changes, &[]).await.unwrap());
        let texts: Vec<String> = s
            .thread_messages(&m.thread())
            .await
            .unwrap()
            .into_iter()
            .map(|stored| stored.text)
            .collect();
        assert_eq!(texts, ["fix the login"]);
        assert_eq!(
            s.message_files(&m).await.unwrap()[0].state,
            FileState::Transcribed
        );
    }

    crate::store::testing::on_both_backends!(
        files_are_stored_once_with_their_message,
        a_heard_voice_note_changes_the_text_and_its_state_at_once,
    );
}
