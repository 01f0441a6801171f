// Interface text of the operator's console, in English and Chinese: the frame here, each
// view's in its own file. main.js adds these to i18n.js's shared strings.

import { ADMIN_VIEW_STRINGS } from "./i18n_admin.js";
import { USAGE_VIEW_STRINGS } from "./i18n_usage.js";

export const CONSOLE_STRINGS = {
  en: {
    opTitle: "Operator",
    opConsole: "Operator console",
    opTenants: "Tenants",
    opKeys: "Keys",
    opBots: "Bots",
    opUsage: "Usage",
    opMemory: "Memory",
    opAudit: "Audit log",
    opSignInTitle: "Operator sign-in",
    opSignInPrompt: "The console needs an admin key.",
    opNeedsAdmin: "That key cannot manage tenants. Sign in with an admin key.",
    ...ADMIN_VIEW_STRINGS.en,
    ...USAGE_VIEW_STRINGS.en,
  },
  zh: {
    opTitle: "运营",
    opConsole: "运营控制台",
    opTenants: "租户",
    opKeys: "密钥",
    opBots: "机器人",
    opUsage: "用量",
    opMemory: "记忆",
    opAudit: "审计日志",
    opSignInTitle: "运营登录",
    opSignInPrompt: "控制台需要管理员密钥。",
    opNeedsAdmin: "该密钥不能管理租户。请用管理员密钥登录。",
    ...ADMIN_VIEW_STRINGS.zh,
    ...USAGE_VIEW_STRINGS.zh,
  },
};
