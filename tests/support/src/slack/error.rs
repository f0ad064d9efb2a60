//! The errors the fake's Web API answers with, one variant per Slack error code it gives: what
//! a call's `{"ok": false, "error": …}` says is the variant's text, exactly Slack's code.

/// A Web API call refused, as Slack names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum ApiError {
    /// A required parameter is missing or not what it should be.
    #[error("invalid_arguments")]
    InvalidArguments,
    /// A JSON body that is no JSON object.
    #[error("invalid_json")]
    InvalidJson,
    /// A body that is no form (or a form that does not parse).
    #[error("invalid_form_data")]
    InvalidFormData,
    /// No token.
    #[error("not_authed")]
    NotAuthed,
    /// A token the workspace does not know.
    #[error("invalid_auth")]
    InvalidAuth,
    /// The bot token where the app token is needed, or the other way round.
    #[error("not_allowed_token_type")]
    NotAllowedTokenType,
    /// A method the fake does not implement.
    #[error("unknown_method")]
    UnknownMethod,
    /// A message with neither text, blocks nor attachments.
    #[error("no_text")]
    NoText,
    /// No message at that timestamp.
    #[error("message_not_found")]
    MessageNotFound,
    /// An edit of a message the bot did not post.
    #[error("cant_update_message")]
    CantUpdateMessage,
    /// The bot already reacted so.
    #[error("already_reacted")]
    AlreadyReacted,
    /// Removing a reaction that is not there.
    #[error("no_reaction")]
    NoReaction,
    /// Completing an upload of an unknown file, or of one whose bytes never arrived.
    #[error("file_not_found")]
    FileNotFound,
    /// Blocks Slack would refuse.
    #[error("invalid_blocks")]
    InvalidBlocks,
    /// Message metadata that is not `{event_type, event_payload}`.
    #[error("invalid_metadata_format")]
    InvalidMetadataFormat,
    /// `conversations.replies` of a timestamp the channel does not hold.
    #[error("thread_not_found")]
    ThreadNotFound,
    /// A `limit` that is no number.
    #[error("invalid_limit")]
    InvalidLimit,
    /// A paging cursor the fake never gave.
    #[error("invalid_cursor")]
    InvalidCursor,
    /// A channel that does not exist, or a private one the bot is not in.
    #[error("channel_not_found")]
    ChannelNotFound,
    /// A channel the bot is not in.
    #[error("not_in_channel")]
    NotInChannel,
    /// A user `users.info` does not know.
    #[error("user_not_found")]
    UserNotFound,
    /// `conversations.create` without a name.
    #[error("invalid_name_required")]
    InvalidNameRequired,
    /// A channel name over 80 characters.
    #[error("invalid_name_maxlength")]
    InvalidNameMaxlength,
    /// A channel name with characters Slack does not allow.
    #[error("invalid_name_specials")]
    InvalidNameSpecials,
    /// A channel name of punctuation only.
    #[error("invalid_name_punctuation")]
    InvalidNamePunctuation,
    /// A channel name already taken.
    #[error("name_taken")]
    NameTaken,
    /// `conversations.join` of a private channel.
    #[error("method_not_supported_for_channel_type")]
    MethodNotSupportedForChannelType,
    /// A streaming call's chunk Slack does not know, or one missing what its type needs.
    #[error("invalid_chunks")]
    InvalidChunks,
    /// More streamed text in one call than Slack takes.
    #[error("msg_too_long")]
    MsgTooLong,
    /// Adding to, or stopping, a streamed message that was stopped.
    #[error("message_not_in_streaming_state")]
    MessageNotInStreamingState,
}
