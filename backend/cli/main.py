"""`tally serve | chat | migrate | doctor | memory | tenants | keys | bench | eval | init`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from backend.cli.logs import configure_logging
from backend.domain.tenants import DEFAULT_TENANT
from backend.errors import ConfigError, TallyError
from backend.settings import Settings, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    configure_logging()
    command: Callable[[argparse.Namespace], int] = args.command
    try:
        return command(args)
    except ConfigError as exc:
        print(f"tally: configuration error\n{exc.message}", file=sys.stderr)
        return 2
    except TallyError as exc:
        print(f"tally: {exc.message} ({exc.code})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tally", description=__doc__)
    parser.add_argument(
        "--config",
        type=Path,
        help="config file (default: TALLY_CONFIG, else config.yaml here, else built-in defaults)",
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument(
        "--insecure-public",
        action="store_true",
        help="listen beyond loopback although auth.mode is none (anyone can chat)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (PostgreSQL and coordination.redis_url; default 1)",
    )
    serve.set_defaults(command=_serve)
    chat = commands.add_parser("chat", help="chat in the terminal, tokens streamed as they come")
    chat.add_argument("--session", help="continue this session id")
    chat.set_defaults(command=_chat)
    migrate = commands.add_parser("migrate", help="apply database migrations")
    migrate.set_defaults(command=_migrate)
    doctor = commands.add_parser("doctor", help="check config, database and provider")
    doctor.add_argument("--offline", action="store_true", help="do not call the provider")
    doctor.set_defaults(command=_doctor)
    memory = commands.add_parser(
        "memory", help="show, search or edit MEMORY.md, or summarize its raw lines again"
    )
    memory.add_argument("action", choices=["show", "search", "edit", "resummarize"])
    memory.add_argument("query", nargs="?", default="", help="words to search for")
    memory.add_argument("--tenant", default=DEFAULT_TENANT)
    memory.add_argument("--user", default="", help="end user (memory.scope: user)")
    memory.set_defaults(command=_memory)
    tenants = commands.add_parser("tenants", help="create, list, disable or enable tenants")
    tenants.add_argument("action", choices=["create", "list", "disable", "enable"])
    tenants.add_argument("tenant_id", nargs="?", default="")
    tenants.add_argument("--name", default="")
    tenants.add_argument("--settings", help="per-tenant overrides as JSON")
    tenants.set_defaults(command=_tenants)
    keys = commands.add_parser("keys", help="create, list or revoke API keys")
    keys.add_argument("action", choices=["create", "list", "revoke"])
    keys.add_argument("target", help="tenant id (create, list) or key id (revoke)")
    keys.add_argument("--scope", choices=["chat", "admin"], default="chat")
    keys.add_argument("--label", default="")
    keys.set_defaults(command=_keys)
    bench = commands.add_parser("bench", help="measure per-turn server overhead")
    bench.add_argument("--quick", action="store_true", help="fewer turns, for a smoke run")
    bench.add_argument(
        "--workers",
        type=int,
        default=0,
        help="measure 1 to N workers on the config's PostgreSQL and Redis instead",
    )
    bench.set_defaults(command=_bench)
    evaluate = commands.add_parser(
        "eval",
        help="measure what the memory recalls of a scripted conversation",
        usage="tally eval memory [--long [--language en|zh]] [--window N] [--facts N]"
        " [--summarizer configured|builtin] [--config PATH]",
    )
    evaluate.add_argument("suite", choices=["memory"], metavar="memory")
    evaluate.add_argument(
        "--window",
        type=_window,
        metavar="N",
        help="messages in the window (default: persona.max_history_messages; -1: unlimited)",
    )
    evaluate.add_argument(
        "--facts",
        type=_positive,
        default=200,
        metavar="N",
        help="facts told in the conversation (200)",
    )
    evaluate.add_argument(
        "--summarizer",
        choices=["configured", "builtin"],
        help="the config's summarizer model, or the built-in rule-based one (default: the"
        " configured one when its key is set)",
    )
    evaluate.add_argument(
        "--long",
        action="store_true",
        help="a conversation over months instead: paraphrased, two-fact, when- and corrected"
        " questions, beside all memory and recency only",
    )
    evaluate.add_argument(
        "--language",
        choices=["en", "zh"],
        help="the long conversation's language (default: persona.language)",
    )
    evaluate.set_defaults(command=_eval)
    init = commands.add_parser("init", help="write a commented config.yaml and prompts/")
    init.add_argument("directory", nargs="?", type=Path, default=Path("."), metavar="DIR")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")
    init.set_defaults(command=_init)
    for sub in (serve, chat, migrate, doctor, memory, tenants, keys, bench, evaluate):
        sub.add_argument("--config", type=Path, default=argparse.SUPPRESS)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config)


def _checked_settings(args: argparse.Namespace) -> Settings:
    """The config's settings; when it has problems, every one of them in one report (those of
    its values, and those building each tenant's runtime finds: tools, templates, keys)."""
    try:
        return _settings(args)
    except ConfigError as exc:
        from backend.composition.build import complete_config_error

        raise asyncio.run(complete_config_error(exc)) from None


def _serve(args: argparse.Namespace) -> int:
    from backend.cli.serve import run_server

    return run_server(
        _checked_settings(args),
        host=args.host,
        port=args.port,
        is_public=args.insecure_public,
        workers=args.workers,
    )


def _migrate(args: argparse.Namespace) -> int:
    from backend.storage.database import open_database
    from backend.storage.migrate import migrate

    settings = _settings(args)

    async def run() -> None:
        database = open_database(settings.database)
        try:
            await migrate(database)
        finally:
            await database.dispose()

    asyncio.run(run())
    print("database is at the newest schema")
    return 0


def _chat(args: argparse.Namespace) -> int:
    from backend.cli.terminal_chat import run_terminal_chat

    return run_terminal_chat(_checked_settings(args), session_id=args.session)


def _doctor(args: argparse.Namespace) -> int:
    from backend.cli.doctor import run_doctor

    return asyncio.run(run_doctor(args.config, is_offline=args.offline))


def _memory(args: argparse.Namespace) -> int:
    from backend.cli.memory_command import run_memory_command

    if args.action == "resummarize":
        from backend.cli.resummarize import run_resummarize

        return asyncio.run(run_resummarize(_settings(args), tenant_id=args.tenant, user=args.user))
    if args.action == "search" and not args.query.strip():
        print("tally memory search: give the words to look for", file=sys.stderr)
        return 2
    return asyncio.run(
        run_memory_command(
            _settings(args),
            action=args.action,
            tenant_id=args.tenant,
            user=args.user,
            query=args.query,
        )
    )


def _tenants(args: argparse.Namespace) -> int:
    from backend.cli.admin_command import run_tenants_command

    if args.action != "list" and not args.tenant_id:
        print(f"tally tenants {args.action}: name the tenant id", file=sys.stderr)
        return 2
    return asyncio.run(run_tenants_command(_settings(args), args))


def _keys(args: argparse.Namespace) -> int:
    from backend.cli.admin_command import run_keys_command

    return asyncio.run(run_keys_command(_settings(args), args))


def _bench(args: argparse.Namespace) -> int:
    from backend.bench.benchmark import run_benchmark

    return run_benchmark(_settings(args), is_quick=args.quick, workers=args.workers)


def _eval(args: argparse.Namespace) -> int:
    if args.long:
        from backend.evals.long_eval import run_long_eval

        return run_long_eval(
            _settings(args), window=args.window, summarizer=args.summarizer, language=args.language
        )
    if args.language is not None:
        print("tally eval memory: --language applies to --long", file=sys.stderr)
        return 2
    from backend.evals.memory_eval import run_memory_eval

    return run_memory_eval(
        _settings(args), window=args.window, facts=args.facts, summarizer=args.summarizer
    )


def _positive(text: str) -> int:
    number = _integer(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {text}")
    return number


def _window(text: str) -> int:
    number = _integer(text)
    if number < 1 and number != -1:
        raise argparse.ArgumentTypeError(f"a number of messages, or -1 for unlimited: {text}")
    return number


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text}") from None


def _init(args: argparse.Namespace) -> int:
    from backend.cli.init_command import run_init

    return run_init(args.directory, is_forced=args.force)
