"""``rbjax agents run`` of a language model behind an OpenAI-compatible endpoint (``--model`` not
``policy:NAME``), fresh stores or a slice (--from-states): its flags checked (``llm_settings``) and the run
(``rbjax.agents.runs.llm_agents``); an endpoint failure or Ctrl-C ends it with one line and a non-zero exit."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import time

from rbjax.checks import need_count
from rbjax.cli.agents_common import (
    finish_saving,
    open_from_states,
    prepare_out,
    print_ceiling,
    slice_summary,
    state_saver,
    summary,
    tool_flags,
)
from rbjax.cli.common import fail, make_env, said
from rbjax.files.record_files import save_records


def llm_settings(args):
    """(OpenAIChatModel keyword arguments, Rules, Prompts) from the flags; one-line errors."""
    from rbjax.agents.llm.client import Sampling, api_key_from_env
    from rbjax.agents.llm.frameworks import Rules
    from rbjax.agents.llm.prompts import Prompts

    for flag, least in (("concurrency", 1), ("max_turns", 1), ("retries", 0), ("trim_tokens", 1)):
        if getattr(args, flag) < least:
            raise fail(f"--{flag.replace('_', '-')} must be >= {least}, got {getattr(args, flag)}")
    if not args.timeout > 0:
        raise fail(f"--timeout must be > 0 seconds, got {args.timeout}")
    if args.context_tokens is not None:
        need_count("--context-tokens", args.context_tokens, error=fail)
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise fail("--base-url URL is needed for a language model (or set OPENAI_BASE_URL)")
    if not re.match(r"https?://", base_url):
        raise fail(f"--base-url {base_url}: expected an http:// or https:// URL")
    if args.api_key_env and not os.environ.get(args.api_key_env):
        raise fail(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    try:
        prompts = Prompts.load(args.prompts)
    except ValueError as e:
        raise fail(f"--prompts: {said(e)}") from None
    sampling = Sampling() if args.sampling == "paper" else Sampling(None, None, None, None)
    if args.max_tokens is not None:
        sampling.max_tokens = args.max_tokens
    model = dict(
        model=args.model,
        base_url=base_url,
        api_key=api_key_from_env(args.api_key_env),
        concurrency=args.concurrency,
        timeout=args.timeout,
        retries=args.retries,
        sampling=sampling,
        stream=not args.no_stream,
        context_tokens=args.context_tokens,
    )
    rules = Rules(
        max_turns=args.max_turns,
        protocol=args.protocol,
        max_input_tokens=args.trim_tokens,
        layout=args.layout,
        compact_catalog=args.compact_catalog,
    )
    return model, rules, prompts


def main_llm(args, opened=None):
    """A language model's run (fresh stores, or a slice: --from-states; opened as ``main_policy_slice``'s).
    Returns a slice run's records [stores, days]."""
    import jax

    try:
        import openai  # noqa: F401
    except ImportError:
        raise fail("language models need the openai package: pip install 'rbjax[agents]'") from None
    from rbjax.agents.llm.client import OpenAIChatModel
    from rbjax.agents.runs.from_states import slice_settings
    from rbjax.agents.runs.llm_agents import RunPaused, run_llm_agents

    model_args, rules, prompts = llm_settings(args)
    sl = None
    if args.from_states:
        prepare_out(args)  # before the warm-up: a used folder is refused at once
        env, sl, states = opened or open_from_states(args)
        params = keys = None
    else:
        env, params = make_env(args)
        keys = jax.random.split(jax.random.key(args.seed), args.stores)
    saver = None if sl is not None else state_saver(args, env, params, keys)
    settings = (
        dict(  # with what run_llm_agents adds, the run's identity (stream and concurrency change nothing)
            model=args.model,
            base_url=model_args["base_url"],
            seed=args.seed,
            grouping=args.grouping,
            supplier_attempts=args.supplier_attempts,
            sampling=dataclasses.asdict(model_args["sampling"]),
            context_tokens=args.context_tokens,
        )
    )
    if sl is not None:
        settings |= slice_settings(states)
    start = time.perf_counter()
    try:  # the snapshots written so far get their manifest even when the run stops early
        rec, tools, agents = run_llm_agents(
            env,
            params,
            keys,
            args.framework,
            OpenAIChatModel(**model_args),
            args.out,
            rules=rules,
            prompts=prompts,
            resume=args.resume,
            settings=settings,
            progress_seconds=args.progress_seconds,
            overwrite=args.overwrite,
            start=sl,
            on_day=saver and saver.reached,
            **tool_flags(args),
        )
    except (ValueError, RunPaused) as e:  # a folder that does not fit the run; the endpoint failed
        raise fail(e) from None
    except KeyboardInterrupt:
        then = "continue with --resume" if sl is None else "a slice run cannot be resumed: run it again"
        print(f"rbjax: interrupted; the days finished so far are kept in {args.out}: {then}", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        finish_saving(saver)
    elapsed = time.perf_counter() - start
    print(
        f"{args.model} ({args.framework}) through the tools, {args.stores} stores x {args.days} days "
        f"({elapsed:.1f} s and {sum(a.total_requests for a in agents):,} requests in this process, "
        f"{tools['requests'].sum():,} requests in the run)"
    )
    save_records(os.path.join(args.out, "records.npz"), rec)
    if sl is not None:
        from rbjax.agents.runs.folder import stores_csv

        slice_summary(args, rec, tools, sl, stores_csv(args.model, args.framework))
        return rec
    summary(args, rec, tools)
    print_ceiling(args)
