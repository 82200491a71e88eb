//! `message`: sends a message to the current chat, or to another chat named by `channel` and `chat_id`.

use super::object_schema;
use super::{Tool, ToolContext, ToolError, ToolFuture, args};
use crate::bus::Outbound;
use crate::json::{Json, Object};

/// `message` (nanobot's parameters: `content`, `channel`, `chat_id`).
pub struct Message;

impl Tool for Message {
    fn name(&self) -> &'static str {
        "message"
    }

    fn description(&self) -> &'static str {
        "Send a message to the user. Goes to the current chat unless both channel and chat_id are given."
    }

    fn parameters(&self) -> Json {
        object_schema(
            &[
                ("content", "string", "The message content to send"),
                (
                    "channel",
                    "string",
                    "Optional: target channel (telegram, discord, etc.); requires chat_id",
                ),
                (
                    "chat_id",
                    "string",
                    "Optional: target chat/user ID; requires channel",
                ),
            ],
            &["content"],
        )
    }

    fn call<'a>(&'a self, args: &'a Object, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let content = args::string(args, "content")?;
            if content.trim().is_empty() {
                return Err(ToolError::InvalidArguments(
                    "`content` is empty; give the text to send".into(),
                ));
            }
            let (channel, chat_id) = target(
                ctx,
                args::opt_string(args, "channel")?,
                args::opt_string(args, "chat_id")?,
            )?;
            let Some(outbound) = &ctx.outbound else {
                return Err(ToolError::Failed(
                    "messaging is not available in this context; put the text in your reply instead".into(),
                ));
            };
            let message = Outbound {
                channel: channel.to_owned(),
                chat_id: chat_id.to_owned(),
                text: content.to_owned(),
            };
            outbound.send(message).map_err(|_| {
                ToolError::Failed(
                    "the outbound queue is closed (the gateway is shutting down); the message was not sent"
                        .into(),
                )
            })?;
            Ok(format!("Message sent to {channel}:{chat_id}"))
        })
    }
}

/// The chat to send to: the explicit `channel` + `chat_id`, or the current chat when neither is given.
fn target<'a>(
    ctx: &'a ToolContext,
    channel: Option<&'a str>,
    chat_id: Option<&'a str>,
) -> Result<(&'a str, &'a str), ToolError> {
    let channel = channel.filter(|c| !c.is_empty());
    let chat_id = chat_id.filter(|c| !c.is_empty());
    match (channel, chat_id) {
        (Some(channel), Some(chat_id)) => Ok((channel, chat_id)),
        (None, None) => Ok((&ctx.channel, &ctx.chat_id)),
        _ => Err(ToolError::InvalidArguments(
            "give both `channel` and `chat_id`, or neither to reply in the current chat".into(),
        )),
    }
}
