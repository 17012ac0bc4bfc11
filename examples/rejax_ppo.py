"""Train rejax's published PPO on one RetailBench store per environment, unchanged but for the line that
makes the environment. Needs ``pip install 'rbjax[rl]' rejax``.

    python examples/rejax_ppo.py                        # 2 million store-days, about an hour on a 2-core CPU
    python examples/rejax_ppo.py --timesteps 8192 --envs 16 --steps 32 --eval-every 8192 --pool 8  # a smoke run

rejax evaluates the policy on 128 stores for a whole episode every ``--eval-every`` steps and returns the
mean episode return (net-worth change, thousands of dollars) at each evaluation.
"""

import argparse
import time

import jax
import rejax

from rbjax.wrappers import GymnaxEnv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=2_000_000, help="store-days in all")
    parser.add_argument("--envs", type=int, default=256, help="stores stepped side by side")
    parser.add_argument("--steps", type=int, default=32, help="days per store per update")
    parser.add_argument("--eval-every", type=int, default=200_000, help="store-days between evaluations")
    parser.add_argument("--pool", type=int, default=256, help="opening stores drawn for the resets")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    env = GymnaxEnv(pool_size=args.pool)  # the one rbjax line: a pool of opening stores, drawn once
    algo = rejax.PPO.create(
        env=env,
        env_params=env.default_params,
        total_timesteps=args.timesteps,
        num_envs=args.envs,
        num_steps=args.steps,
        num_epochs=4,
        num_minibatches=4,
        eval_freq=args.eval_every,
        skip_initial_evaluation=True,
        normalize_observations=True,
        normalize_rewards=True,
        learning_rate=3e-4,
    )
    start = time.perf_counter()
    train_state, (lengths, returns) = jax.jit(algo.train)(jax.random.key(args.seed))
    jax.block_until_ready(returns)
    print(f"trained {args.timesteps} store-days in {time.perf_counter() - start:.0f} s (compile included)")
    for i, (length, ret) in enumerate(zip(lengths.mean(1), returns.mean(1)), 1):
        print(f"evaluation {i}: mean episode length {float(length):.0f} days, mean return {float(ret):+.2f}")


if __name__ == "__main__":
    main()
