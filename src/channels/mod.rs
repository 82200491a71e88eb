//! Channels: where messages come from and replies go. For now the terminal; Telegram and Discord join with the
//! gateway.

pub mod terminal;
