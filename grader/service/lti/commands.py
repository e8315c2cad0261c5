"""`gspo-grader lti ...`: register LMSs and manage this tool's keys, in the service's
database (GSPO_GRADER_DATABASE_URL, else the SQLite file in --data-dir; SQLite is migrated
as the service would, PostgreSQL must be current).

    gspo-grader lti add-platform --issuer URL --client-id ID --deployment-id ID [...]
                                 --auth-url URL --token-url URL --jwks-url URL
                                 [--token-audience AUD] [--name NAME]
    gspo-grader lti platforms       the registrations, and the values to give each LMS
    gspo-grader lti rotate-key      a new signing key (the previous one stays published)
"""

from __future__ import annotations

import argparse
import sys


def lti_parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="gspo-grader lti", description="LTI 1.3 registrations.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", default=None, help="the service's data folder (SQLite)")
    commands = root.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = commands.add_parser(
        "add-platform", parents=[common], help="register an LMS, or update its registration"
    )
    add.add_argument("--issuer", required=True, help="the LMS's issuer (iss), a URL")
    add.add_argument("--client-id", required=True, help="the client id the LMS gave this tool")
    add.add_argument(
        "--deployment-id", action="append", required=True, help="may be given several times"
    )
    add.add_argument("--auth-url", required=True, help="the LMS's OIDC authorisation URL")
    add.add_argument("--token-url", required=True, help="the LMS's OAuth 2 token URL")
    add.add_argument("--jwks-url", required=True, help="the LMS's public key set URL")
    add.add_argument(
        "--token-audience", default=None, help="aud of token requests, if not the token URL"
    )
    add.add_argument("--name", default=None, help="a name for people (default: the issuer)")
    commands.add_parser("platforms", parents=[common], help="the LMSs and this tool's URLs")
    commands.add_parser("rotate-key", parents=[common], help="make a new signing key")
    return root


def run_lti_command(argv: list[str]) -> int:
    from grader.service.lti.rows import LtiStore
    from grader.settings import load_settings
    from grader.store import open_store

    args = lti_parser().parse_args(argv)
    try:
        settings = load_settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
        store = LtiStore(
            open_store(settings.resolved_database_url, migrate=not settings.distributed).engine
        )
    except Exception as error:  # SettingsError, DatabaseError: one line
        return _refuse(str(error))
    try:
        action = {"add-platform": _add_platform, "platforms": _platforms}
        return action.get(args.action, _rotate_key)(args, store, settings.public_url)
    finally:
        store.engine.dispose()


def _refuse(message: str) -> int:
    print(f"gspo-grader: error: {message}", file=sys.stderr)
    return 2


def _add_platform(args: argparse.Namespace, store, base: str | None) -> int:
    urls = {"issuer": args.issuer, "auth_url": args.auth_url, "token_url": args.token_url}
    urls["jwks_url"] = args.jwks_url
    for name, url in urls.items():
        if not url.startswith(("https://", "http://")):
            return _refuse(f"--{name.replace('_', '-')} must be a full URL; got {url!r}")
    values = {**urls, "client_id": args.client_id, "token_audience": args.token_audience}
    values["name"] = args.name or args.issuer
    platform, created = store.save_platform(values, args.deployment_id)
    verb = "registered" if created else "updated"
    print(f"{verb} {platform.name}: issuer {platform.issuer}, client id {platform.client_id}")
    print(f"  deployments: {', '.join(platform.deployment_ids)}")
    return _print_tool_values(base)


def _platforms(args: argparse.Namespace, store, base: str | None) -> int:
    found = store.platforms()
    if not found:
        print("no LMS is registered; add one with `gspo-grader lti add-platform`")
    for p in found:
        print(f"{p.platform_id}. {p.name}")
        print(f"   issuer {p.issuer}  client id {p.client_id}")
        print(f"   deployments {', '.join(p.deployment_ids) or '(none)'}")
        print(f"   auth {p.auth_url}\n   token {p.token_url} (aud {p.audience})")
        print(f"   jwks {p.jwks_url}")
    return _print_tool_values(base)


def _rotate_key(args: argparse.Namespace, store, base: str | None) -> int:
    from grader.service.lti.credentials import ToolKeys

    kid = ToolKeys(store).rotate()
    print(f"new signing key {kid}; the previous key stays published at /lti/jwks")
    return 0


def _print_tool_values(base: str | None) -> int:
    shown = base or "https://YOUR-GRADER"
    print("Give the LMS these values for this tool:")
    print(f"  OIDC login URL (initiate login):  {shown}/lti/login")
    print(f"  redirect URI:                     {shown}/lti/launch")
    print(f"  target link URI:                  {shown}/lti/launch?exercise=ID")
    print(f"  public key set (JWKS) URL:        {shown}/lti/jwks")
    if base is None:
        print("  (set GSPO_GRADER_PUBLIC_URL to the address the LMS reaches this service at)")
    return 0
