// The chat platforms Tally's bots run on, by the kind a bot's settings and its sessions'
// channel name (backend/channels/registry.py): the name people know each by.

export const PLATFORM_NAMES = {
  telegram: "Telegram",
  dingtalk: "DingTalk",
  feishu: "Feishu / Lark",
  wecom: "WeCom",
  slack: "Slack",
  discord: "Discord",
  qq: "QQ",
};
