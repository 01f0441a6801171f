// Interface text in English and Chinese. Elements carry `data-i18n` (their text) and
// `data-i18n-attr` ("attr:key;attr:key"), so switching language re-labels the page in place.

import { CONSOLE_STRINGS } from "./operator/i18n_console.js";
import { PEOPLE_STRINGS } from "./i18n_people.js";

const STRINGS = {
  en: {
    newChat: "New chat",
    searchChats: "Search chats",
    noSessions: "No conversations yet. Start one below.",
    noMatches: "No chats match your search.",
    untitled: "New chat",
    rename: "Rename",
    delete: "Delete",
    confirmDelete: "Delete?",
    loadMore: "Load more",
    today: "Today",
    yesterday: "Yesterday",
    previous7: "Previous 7 days",
    older: "Older",
    menu: "Menu",
    close: "Close",
    placeholder: "Message Tally…",
    hint: "Enter to send · Shift+Enter for a new line",
    send: "Send",
    stop: "Stop",
    attach: "Attach images",
    removeImage: "Remove image",
    imageType: "{name} is not a PNG, JPEG, GIF or WebP image.",
    imageTooLarge: "{name} is larger than 5 MB.",
    imageUnreadable: "{name} could not be read.",
    tooManyImages: "At most {n} images per message.",
    thinking: "Thinking",
    thinkingLive: "Thinking…",
    toolArguments: "Arguments",
    toolResult: "Result",
    toolRunning: "running…",
    toolFailed: "failed",
    toolAwaitingApproval: "needs approval",
    toolDenied: "denied",
    toolApproval: "Approval",
    approvalWaiting: "Waiting for your approval",
    approvalDeadlineSeconds: "denied automatically in {n} s",
    approvalDeadlineMinutes: "denied automatically in {n} min",
    approvalDeadlineHours: "denied automatically in {n} h",
    approvalActions: "Approve or deny this tool call",
    approve: "Approve",
    deny: "Deny",
    approvedByYou: "Approved",
    deniedByYou: "Denied: it will not run",
    approvalGone: "This call was no longer waiting for a decision.",
    approvalFailed: "Your decision was not sent: {message}",
    copy: "Copy",
    copied: "Copied",
    copyReply: "Copy reply",
    incomplete: "Incomplete",
    incompleteHint: "This reply was cut off before it finished.",
    errorTitle: "The reply failed",
    stoppedTitle: "Stopped",
    retry: "Retry",
    regenerate: "Regenerate",
    regenerateHint: "Send your last message again, as a new turn",
    editResend: "Edit and resend",
    editResendHint:
      "Edit your last message and send it as a new turn; the original stays in the conversation",
    retryAfter: "You can retry in {s} s.",
    retrying: "{provider} failed ({reason}); retrying in {s} s (attempt {n})…",
    retryingBecause: "{message}; retrying in {s} s (attempt {n})…",
    fallingBack: "Trying {provider} instead…",
    compacted: "Earlier messages were compacted to fit the context",
    compactedTokens: "{before} → {after} tokens",
    compactedHint:
      "Older messages were left out of this request to fit the model's context window. They are still saved.",
    compactedHintCount:
      "{n} older messages were left out of this request to fit the model's context window. They are still saved.",
    contextGauge:
      "Context: {used} of {budget} tokens ({percent}%) in the last request. Older messages are summarized from {normal}% and left out from {emergency}%.",
    promptCached: "{cached} of {prompt} prompt tokens were read from the model's prompt cache.",
    interrupted: "The connection closed before the reply finished.",
    networkError: "Cannot reach the Tally server.",
    degraded: "The server's database is unavailable; chats cannot be saved right now.",
    summaryTitle: "Summary of earlier conversation",
    summaryAdd: "Add summary",
    summaryAddHint:
      "Add a summary of this conversation. Tally writes one itself when older messages leave its memory window.",
    summaryEdit: "Edit summary",
    summarySaved: "Summary saved",
    save: "Save",
    cancel: "Cancel",
    showEarlier: "Show earlier messages",
    earlierDivider: "Earlier messages · outside the memory window",
    demoTitle: "Demo mode",
    demoBadge: "demo",
    demoNoKeyEnv:
      "Tally is answering with its built-in demo provider because {env} is not set. Set it and restart to talk to a real model.",
    demoNoKey:
      "Tally is answering with its built-in demo provider: no LLM model and key are configured. Configure one and restart to talk to a real model.",
    demoConfigFile: "The model, its provider and the key's variable are set in {file}.",
    demoWindow: "The demo keeps only the last {n} messages of a conversation in mind.",
    demoDismiss: "Dismiss",
    emptyTitle: "How can I help?",
    emptySubtitle: "Ask anything. Conversations are saved in the sidebar.",
    suggest1: "What time is it in Shanghai?",
    suggest2: "Explain rolling-window memory in two sentences",
    suggest3: "Write a haiku about remembering",
    memory: "Memory",
    memoryTitle: "Long-term memory",
    memorySearch: "Search memory",
    memoryEmpty: "Nothing remembered yet.",
    memoryEditRaw: "Edit as text",
    memorySaved: "Memory saved",
    memoryFrom: "From a conversation · messages #{first}–#{last}",
    memoryFromTitled: "From “{title}” · messages #{first}–#{last}",
    memoryEditEntry: "Edit entry",
    memoryEntryLabel: "Memory entry",
    memoryEntryChanged: "This entry changed in the meantime; the list has been refreshed.",
    memorySaveFailed: "Could not save",
    memoryRevert: "Revert",
    memoryRevertHint: "Undo the summary that wrote this entry",
    memoryRevertConfirm:
      "Undo this summary? The entry is removed; messages #{first}–#{last} return to the conversation if they were its last to leave it, or are summarized again.",
    memoryReverted: "Compaction reverted: the messages are back in the conversation.",
    memoryRedistilled: "Entry removed: its messages are being summarized again.",
    memoryReplaced: "replaced",
    memoryDegraded: "Memory is degraded: {reason}",
    memoryReplacedHint: "A newer entry replaced this fact; the model is no longer told it",
    memoryRevertFailed: "Could not revert",
    memoryAdd: "Add memory",
    memoryAddLabel: "A fact to remember",
    memoryAddPlaceholder: "One fact, e.g. “Prefers metric units”",
    memoryAdded: "Remembered",
    memoryAddFailed: "Could not add",
    memoryNotParsed: "not parsed",
    memoryNotParsedHint:
      "This line is not in the date|source|fact form, so Tally does not use it. It is kept as written: fix it with “Edit as text”.",
    signInTitle: "Sign in to Tally",
    signInPrompt: "This server needs an API key. It is kept only for this browser tab.",
    apiKey: "API key",
    signIn: "Sign in",
    keyRejected: "That key was not accepted.",
    tenantDisabled: "This key's tenant is disabled. Ask its operator to enable it.",
    keyForbidden:
      "That is the operator key: it opens the console at /operator/. Sign in with a tenant's key to chat.",
    signOut: "Sign out",
    themeToggle: "Switch light/dark theme",
    langToggle: "中文",
    langToggleLabel: "切换到中文",
    loading: "Loading…",
    sessionGone: "That conversation no longer exists.",
    you: "You",
    renamed: "Renamed",
    deleted: "Conversation deleted",
    ...PEOPLE_STRINGS.en,
    ...CONSOLE_STRINGS.en,
  },
  zh: {
    newChat: "新对话",
    searchChats: "搜索对话",
    noSessions: "还没有对话，在下方开始吧。",
    noMatches: "没有符合搜索的对话。",
    untitled: "新对话",
    rename: "重命名",
    delete: "删除",
    confirmDelete: "确认删除？",
    loadMore: "加载更多",
    today: "今天",
    yesterday: "昨天",
    previous7: "过去 7 天",
    older: "更早",
    menu: "菜单",
    close: "关闭",
    placeholder: "给 Tally 发消息…",
    hint: "Enter 发送 · Shift+Enter 换行",
    send: "发送",
    stop: "停止",
    attach: "添加图片",
    removeImage: "移除图片",
    imageType: "{name} 不是 PNG、JPEG、GIF 或 WebP 图片。",
    imageTooLarge: "{name} 超过 5 MB。",
    imageUnreadable: "无法读取 {name}。",
    tooManyImages: "每条消息最多 {n} 张图片。",
    thinking: "思考过程",
    thinkingLive: "正在思考…",
    toolArguments: "参数",
    toolResult: "结果",
    toolRunning: "运行中…",
    toolFailed: "失败",
    toolAwaitingApproval: "待批准",
    toolDenied: "已拒绝",
    toolApproval: "审批",
    approvalWaiting: "等待你的批准",
    approvalDeadlineSeconds: "{n} 秒后自动拒绝",
    approvalDeadlineMinutes: "{n} 分钟后自动拒绝",
    approvalDeadlineHours: "{n} 小时后自动拒绝",
    approvalActions: "批准或拒绝此工具调用",
    approve: "批准",
    deny: "拒绝",
    approvedByYou: "已批准",
    deniedByYou: "已拒绝：它不会运行",
    approvalGone: "此调用已不再等待决定。",
    approvalFailed: "你的决定未能发送：{message}",
    copy: "复制",
    copied: "已复制",
    copyReply: "复制回复",
    incomplete: "未完成",
    incompleteHint: "此回复在完成前被中断。",
    errorTitle: "回复失败",
    stoppedTitle: "已停止",
    retry: "重试",
    regenerate: "重新生成",
    regenerateHint: "把你的上一条消息作为新的一轮再次发送",
    editResend: "编辑后重发",
    editResendHint: "编辑你的上一条消息并作为新的一轮发送；原消息仍保留在对话中",
    retryAfter: "{s} 秒后可重试。",
    retrying: "{provider} 调用失败（{reason}），{s} 秒后重试（第 {n} 次）…",
    retryingBecause: "{message}；{s} 秒后重试（第 {n} 次）…",
    fallingBack: "改用 {provider}…",
    compacted: "较早的消息已被压缩，以适应上下文窗口",
    compactedTokens: "{before} → {after} 个 token",
    compactedHint: "为适应模型的上下文窗口，本次请求省略了较早的消息。这些消息仍然保存着。",
    compactedHintCount:
      "为适应模型的上下文窗口，本次请求省略了 {n} 条较早的消息。这些消息仍然保存着。",
    contextGauge:
      "上下文：上一次请求用了 {used} / {budget} 个 token（{percent}%）。超过 {normal}% 时较早的消息会被摘要，超过 {emergency}% 时会被省略。",
    promptCached: "{prompt} 个提示 token 中有 {cached} 个来自模型的提示缓存。",
    interrupted: "回复完成前连接已断开。",
    networkError: "无法连接 Tally 服务器。",
    degraded: "服务器数据库不可用，暂时无法保存对话。",
    summaryTitle: "更早对话的摘要",
    summaryAdd: "添加摘要",
    summaryAddHint: "为此对话添加摘要。较早的消息移出记忆窗口时，Tally 会自动撰写摘要。",
    summaryEdit: "编辑摘要",
    summarySaved: "摘要已保存",
    save: "保存",
    cancel: "取消",
    showEarlier: "显示更早的消息",
    earlierDivider: "更早的消息 · 已在记忆窗口之外",
    demoTitle: "演示模式",
    demoBadge: "演示",
    demoNoKeyEnv:
      "未设置 {env}，Tally 正在用内置的演示模型回答。设置它并重启后即可与真实模型对话。",
    demoNoKey:
      "未配置任何 LLM 模型和密钥，Tally 正在用内置的演示模型回答。配置后重启即可与真实模型对话。",
    demoConfigFile: "模型、服务商和密钥的环境变量名在 {file} 中设置。",
    demoWindow: "演示模式只记住对话中最近的 {n} 条消息。",
    demoDismiss: "关闭提示",
    emptyTitle: "有什么可以帮你？",
    emptySubtitle: "随便问。所有对话都保存在侧边栏。",
    suggest1: "上海现在几点？",
    suggest2: "用两句话解释滚动窗口记忆",
    suggest3: "写一首关于记忆的短诗",
    memory: "记忆",
    memoryTitle: "长期记忆",
    memorySearch: "搜索记忆",
    memoryEmpty: "还没有记住任何内容。",
    memoryEditRaw: "以文本编辑",
    memorySaved: "记忆已保存",
    memoryFrom: "来自一段对话 · 消息 #{first}–#{last}",
    memoryFromTitled: "来自“{title}” · 消息 #{first}–#{last}",
    memoryEditEntry: "编辑条目",
    memoryEntryLabel: "记忆条目",
    memoryEntryChanged: "该条目已被修改，列表已刷新。",
    memorySaveFailed: "无法保存",
    memoryRevert: "撤销",
    memoryRevertHint: "撤销写入此条目的那次摘要",
    memoryRevertConfirm:
      "撤销这次摘要？此条目将被删除；若消息 #{first}–#{last} 是最近离开对话的，它们会回到对话中，否则会被重新摘要。",
    memoryReverted: "已撤销压缩：这些消息已回到对话中。",
    memoryRedistilled: "条目已删除：其消息正在重新摘要。",
    memoryReplaced: "已替换",
    memoryDegraded: "记忆功能受损：{reason}",
    memoryReplacedHint: "较新的条目替换了这条事实，模型不再看到它",
    memoryRevertFailed: "无法撤销",
    memoryAdd: "添加记忆",
    memoryAddLabel: "要记住的事实",
    memoryAddPlaceholder: "一条事实，例如“偏好公制单位”",
    memoryAdded: "已记住",
    memoryAddFailed: "无法添加",
    memoryNotParsed: "未解析",
    memoryNotParsedHint:
      "此行不符合“日期|来源|内容”格式，Tally 不会使用它。它按原样保留：可用“以文本编辑”修正。",
    signInTitle: "登录 Tally",
    signInPrompt: "此服务器需要 API 密钥。密钥只保存在当前浏览器标签页中。",
    apiKey: "API 密钥",
    signIn: "登录",
    keyRejected: "密钥无效。",
    tenantDisabled: "该密钥所属的租户已停用，请联系运维启用。",
    keyForbidden: "这是运维管理员密钥，可打开 /operator/ 控制台。请使用租户的密钥登录来聊天。",
    signOut: "退出登录",
    themeToggle: "切换浅色/深色主题",
    langToggle: "English",
    langToggleLabel: "Switch to English",
    loading: "加载中…",
    sessionGone: "该对话已不存在。",
    you: "你",
    renamed: "已重命名",
    deleted: "对话已删除",
    ...PEOPLE_STRINGS.zh,
    ...CONSOLE_STRINGS.zh,
  },
};

const LANG_KEY = "tally.lang";
const listeners = new Set();

function initialLanguage() {
  const saved = localStorage.getItem(LANG_KEY);
  if (saved && saved in STRINGS) return saved;
  const preferred = navigator.languages?.[0] || navigator.language || "en";
  return preferred.toLowerCase().startsWith("zh") ? "zh" : "en";
}

let lang = initialLanguage();

export function language() {
  return lang;
}

export function locale() {
  return lang === "zh" ? "zh-CN" : "en";
}

export function t(key, vars = {}) {
  const text = STRINGS[lang][key] ?? STRINGS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

/** Label every marked element under `root` in the current language. */
export function applyI18n(root = document) {
  document.documentElement.lang = locale();
  for (const el of root.querySelectorAll("[data-i18n]")) {
    const vars = el.dataset.i18nVars ? JSON.parse(el.dataset.i18nVars) : {};
    el.textContent = t(el.dataset.i18n, vars);
  }
  for (const el of root.querySelectorAll("[data-i18n-attr]")) {
    const vars = el.dataset.i18nAttrVars ? JSON.parse(el.dataset.i18nAttrVars) : {};
    for (const pair of el.dataset.i18nAttr.split(";")) {
      const [attr, key] = pair.split(":");
      el.setAttribute(attr, t(key, vars));
    }
  }
}

export function setLanguage(next) {
  lang = next in STRINGS ? next : "en";
  localStorage.setItem(LANG_KEY, lang);
  applyI18n();
  for (const listener of listeners) listener(lang);
}

export function onLanguageChange(listener) {
  listeners.add(listener);
}

export function formatTime(iso) {
  const date = new Date(iso);
  return date.toLocaleTimeString(locale(), { hour: "2-digit", minute: "2-digit" });
}

export function formatDateTime(iso) {
  const date = new Date(iso);
  return date.toLocaleString(locale(), { dateStyle: "medium", timeStyle: "short" });
}

/** The sidebar group a timestamp falls in: today, yesterday, the past week, or older. */
export function dayGroup(iso, now = new Date()) {
  const startOfToday = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
  const time = new Date(iso).getTime();
  const day = 24 * 60 * 60 * 1000;
  if (time >= startOfToday) return "today";
  if (time >= startOfToday - day) return "yesterday";
  if (time >= startOfToday - 7 * day) return "previous7";
  return "older";
}
