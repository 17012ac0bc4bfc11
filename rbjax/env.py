"""The store as a gymnax-style environment: ``reset(key, params)`` and ``step(key, state, action, params)``.

One ``step`` is one RetailBench day: the agent's action (prices, shelf, orders, paid at once), then the
reference's ``end_today`` in its exact order (SIMULATOR.md §2). All functions are pure and jittable;
``vmap`` them over keys and params for a batch of stores.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rbjax.kernels import rng

from rbjax.model import demand, preopening as history, inventory, news, orders, reviews, supplier_log, suppliers
from rbjax.config import EnvConfig
from rbjax.kernels.xla import fsum, materialize
from rbjax.data.catalog import Catalog, load_catalog
from rbjax.params import EnvParams, World, check_params, default_params
from rbjax.state import Action, DayInfo, EnvState, Observation, Privileged

_NEWS_STREAM = 1_000_003


class Env:
    """RetailBench hard_v2 store.

    >>> env = Env()                               # shipped catalogue, 20 categories
    >>> params = env.default_params()
    >>> obs, state = env.reset(jax.random.key(0), params)
    >>> obs, state, reward, terminated, truncated, info = env.step(key, state, Action.noop(state), params)
    """

    def __init__(self, config: EnvConfig | None = None, catalog: Catalog | None = None):
        self.catalog = catalog if catalog is not None else load_catalog()
        self.config = config if config is not None else EnvConfig.from_catalog(self.catalog)
        if self.config.num_products != self.catalog.num_products:
            raise ValueError(f"EnvConfig has {self.config.num_products} products, the catalogue "
                             f"{self.catalog.num_products}")
        self._category_of = np.asarray(self.config.category_of, np.int32)

    def default_params(self) -> EnvParams:
        return default_params(self.catalog, self.config)

    def check_params(self, params: EnvParams) -> EnvParams:
        """Validate concrete params (Python boundary); returns them for chaining."""
        check_params(params, self.config)
        return params

    # ------------------------------------------------------------------ reset
    def reset(self, key: jax.Array, params: EnvParams) -> tuple[Observation, EnvState]:
        cfg, f = self.config, self.config.float_dtype
        J, K, C, D, N = cfg.num_products, cfg.num_suppliers, cfg.lot_slots, cfg.pending_slots, cfg.news_slots
        k_world, k_hist, k_price = jax.random.split(key, 3)
        world = params.world if params.world is not None else suppliers.make_world(k_world, params, cfg.history_days)
        hist = history.simulate(k_hist, cfg, params, world)
        # no review at all before opening: the reference would refuse to start; rbjax uses the anchor rating
        rating0 = reviews.window_rating(hist["rev_window_count"], hist["rev_window_sum"], hist["rev_old_count"],
                                        hist["rev_old_sum"], params.anchor_rating)
        open_day = params.open_day
        news_items = news.sample_items(self._news_key(world, open_day), params, N, cfg.num_categories)
        q_tier, p_tier = suppliers.update_tiers(world, params, hist["quality_tier"], hist["price_tier"], open_day)
        supply = news.effect(params, params.supply_category, news_items[0], news_items[1], news_items[2],
                             news_items[3], factor_need=False)
        quote_price, quote_quality = suppliers.daily_quotes(world, params, q_tier, p_tier, open_day, supply)
        u = rng.uniform(k_price, (J,), f)
        zeros_jc = jnp.zeros((J, C), jnp.int32)
        state = EnvState(
            day=jnp.zeros((), jnp.int32), funds=params.initial_funds.astype(f), net_worth=params.initial_funds.astype(f),
            prices=(params.price_min + (params.price_max - params.price_min) * u).astype(f),
            shelf=jnp.zeros(J, bool),
            lot_store=zeros_jc, lot_wait=zeros_jc, lot_arrival=zeros_jc,
            lot_cost=jnp.zeros((J, C), f), lot_quality=jnp.zeros((J, C), f), lot_supplier=jnp.zeros((J, C), jnp.int8),
            pend_qty=jnp.zeros((D, J), jnp.int32), pend_cost=jnp.zeros((D, J), f), pend_quality=jnp.zeros((D, J), f),
            pend_supplier=jnp.zeros((D, J), jnp.int8), supplier_log=jnp.zeros((4, J, K), f),
            rev_count=hist["rev_count"], rev_sum=hist["rev_sum"], rev_window_count=hist["rev_window_count"],
            rev_window_sum=hist["rev_window_sum"], rev_old_count=hist["rev_old_count"],
            rev_old_sum=hist["rev_old_sum"], rating0=rating0.astype(f),
            hist_price=hist["hist_price"].astype(f), hist_units=hist["hist_units"],
            history_profit=hist["history_profit"].astype(f),
            quality_tier=q_tier, price_tier=p_tier, quote_price=quote_price.astype(f),
            quote_quality=quote_quality.astype(f),
            news_mode=news_items[0], news_target=news_items[1], news_need=news_items[2],
            news_signed=news_items[3].astype(f), news_remain=news_items[4],
            neg_days=jnp.zeros((), jnp.int32), done=jnp.zeros((), bool), world=world,
        )
        return self.observe(state, params), state

    @staticmethod
    def _news_key(world: World, cal_day):
        return jax.random.fold_in(jax.random.fold_in(world.prng(), _NEWS_STREAM), cal_day)

    # ------------------------------------------------------------------ step
    def check_action(self, action: Action) -> None:
        """Shape and dtype checks (run at trace time, so free inside jit); raise ValueError naming the field."""
        J, K = self.config.num_products, self.config.num_suppliers
        for name, shape in (("price", (J,)), ("shelf", (J,)), ("order", (J, K)), ("set_price", (J,)),
                            ("order_rank", (J,))):
            x = getattr(action, name)
            if x is None and name in ("set_price", "order_rank"):
                continue
            if not hasattr(x, "shape") or tuple(x.shape) != shape:
                raise ValueError(f"Action.{name} must have shape {shape}, got {getattr(x, 'shape', type(x))}")
            if not (jnp.issubdtype(x.dtype, jnp.number) or x.dtype == jnp.bool_):
                raise ValueError(f"Action.{name} must be numeric, got dtype {x.dtype}")

    def step(self, key: jax.Array, state: EnvState, action: Action, params: EnvParams):
        """One day. Returns (obs, state, reward, terminated, truncated, info: DayInfo).

        reward = change in net worth. After the episode ended (``state.done``) the state is returned
        unchanged, reward 0 and info.alive False.
        """
        self.check_action(action)
        cfg, f = self.config, self.config.float_dtype
        J, R, W, D = cfg.num_products, cfg.review_window, cfg.sales_window, cfg.pending_slots
        k_lead, k_attr, k_demand, k_reviews = jax.random.split(key, 4)
        s, world = state, state.world
        cal = params.open_day + s.day

        # ---- the agent's actions (intra-day): prices, shelf, orders paid at once
        price = action.price.astype(f)
        price_call = (price != s.prices) if action.set_price is None else action.set_price.astype(bool)
        price_valid = jnp.isfinite(price) & (price > 0)
        price_ok = price_call & price_valid
        prices = jnp.where(price_ok, price, s.prices)
        wanted_shelf = action.shelf.astype(bool)
        shelf_ok = wanted_shelf.sum() <= params.shelf_capacity
        shelf = jnp.where(shelf_ok, wanted_shelf, s.shelf)
        units, invalid_orders = orders.sanitize(action.order.astype(f), params.max_units_per_order)
        line_cost = units.astype(f) * s.quote_price
        accepted, spent = orders.accept_by_funds(line_cost, s.funds, action.order_rank)
        refused = jnp.sum((units > 0) & ~accepted, dtype=jnp.int32)
        units, = materialize(jnp.where(accepted, units, 0))
        funds = s.funds - spent
        pend_qty, pend_cost, pend_quality, lead = orders.place(
            k_lead, units, s.quote_price, s.quote_quality, world.transport_min, world.transport_max, cal,
            s.pend_qty, s.pend_cost, s.pend_quality)
        pend_supplier = supplier_log.tag_pending(s.pend_supplier, units, (cal + lead) % D)

        # ---- end_today: steps 1-9 of SIMULATOR.md §2
        traffic = params.traffic[cal]
        # Step 2 (morning admission) is skipped: after every day's evening admission and deliveries either the
        # queue is empty or the store is full, so it never admits a unit (tests/test_inventory.py checks this).
        lot_store, lot_wait = s.lot_store, s.lot_wait
        on_hand = fsum(lot_store, -1)
        in_stock = on_hand > 0
        rating = reviews.window_rating(s.rev_window_count, s.rev_window_sum, s.rev_old_count, s.rev_old_sum, s.rating0)
        gain = (reviews.review_gain(params.review_poly, self._category_of, rating)
                - reviews.review_gain(params.review_poly, self._category_of, s.rating0))
        need = news.effect(params, self._category_of, s.news_mode, s.news_target, s.news_need, s.news_signed, True)
        a = demand.attraction(k_attr, params, prices, gain + need, cal) * in_stock
        visible = in_stock & shelf & (a > 0)
        wanted, _ = demand.category_demand(k_demand, cfg, params, a, visible, traffic)
        wanted = wanted.astype(jnp.int32)
        sold = jnp.minimum(wanted, on_hand)
        stockout = wanted > on_hand
        taken, = materialize(inventory.take_fifo(lot_store, s.lot_arrival, sold))
        returned, n_reviews, star_sum = materialize(*reviews.returns_and_reviews(
            k_reviews, taken.astype(f), s.lot_quality, params.review_ratio))   # sampled once, not per supplier
        log = supplier_log.update(s.supplier_log, supplier_log.sold_by_supplier(taken, s.lot_supplier, cfg.num_suppliers),
                                  returned, n_reviews, star_sum)
        returned = returned.astype(jnp.int32)
        lot_store = lot_store - taken
        revenue = fsum(prices * sold)
        refunds = fsum(prices * returned)
        rev_count, rev_sum, rev_window_count, rev_window_sum, rev_old_count, rev_old_sum = reviews.push_reviews(
            s.rev_count, s.rev_sum, s.rev_window_count, s.rev_window_sum, s.rev_old_count, s.rev_old_sum,
            cal % R, n_reviews, star_sum)
        today = (jnp.arange(W) == cal % W)[:, None]
        hist_price = jnp.where(today, prices[None], s.hist_price)
        hist_units = jnp.where(today, sold[None], s.hist_units)
        lot_store, lot_wait, expired = inventory.expire(lot_store, lot_wait, s.lot_arrival, params.shelf_life, cal)
        lot_store, lot_wait = inventory.admit_waiting(lot_store, lot_wait, s.lot_arrival, params.capacity)

        # ---- steps 11-16: news for tomorrow, money, date, deliveries, rent, tomorrow's quotes, net worth
        items = news.advance(self._news_key(world, cal + 1), params, cfg.num_categories, s.news_mode,
                             s.news_target, s.news_need, s.news_signed, s.news_remain)
        funds = funds + revenue - refunds
        tomorrow = cal + 1
        slot = (jnp.arange(D) == tomorrow % D)[:, None]
        arriving = lambda x: fsum(jnp.where(slot, x, 0), 0)
        delivered = arriving(pend_qty)
        lot_store, lot_wait, lot_arrival, lot_cost, lot_quality, merged = inventory.deliver(
            lot_store, lot_wait, s.lot_arrival, s.lot_cost, s.lot_quality, delivered, arriving(pend_cost),
            arriving(pend_quality), tomorrow, params.capacity)
        lot_supplier = supplier_log.tag_lots(s.lot_supplier, lot_arrival, delivered,
                                             fsum(jnp.where(slot, pend_supplier, 0).astype(jnp.int32), 0), tomorrow)
        pend_qty, pend_cost, pend_quality = (jnp.where(slot, 0, x) for x in (pend_qty, pend_cost, pend_quality))
        funds = funds - params.rent
        q_tier, p_tier = suppliers.update_tiers(world, params, s.quality_tier, s.price_tier, tomorrow)
        supply = news.effect(params, params.supply_category, items[0], items[1], items[2], items[3], False)
        quote_price, quote_quality = suppliers.daily_quotes(world, params, q_tier, p_tier, tomorrow, supply)
        net_worth = (funds + inventory.book_value(lot_store, lot_wait, lot_arrival, lot_cost, params.shelf_life,
                                                  tomorrow) + fsum(fsum(pend_cost, -1)))
        neg_days = jnp.where(funds < 0, s.neg_days + 1, 0)
        terminated = neg_days >= params.neg_funds_days
        truncated = (s.day + 1 >= params.horizon) & ~terminated

        new = EnvState(
            day=s.day + 1, funds=funds, net_worth=net_worth, prices=prices, shelf=shelf,
            lot_store=lot_store, lot_wait=lot_wait, lot_arrival=lot_arrival, lot_cost=lot_cost,
            lot_quality=lot_quality, lot_supplier=lot_supplier, pend_qty=pend_qty, pend_cost=pend_cost,
            pend_quality=pend_quality, pend_supplier=pend_supplier, supplier_log=log,
            rev_count=rev_count, rev_sum=rev_sum, rev_window_count=rev_window_count, rev_window_sum=rev_window_sum,
            rev_old_count=rev_old_count, rev_old_sum=rev_old_sum,
            rating0=s.rating0, hist_price=hist_price, hist_units=hist_units, history_profit=s.history_profit,
            quality_tier=q_tier, price_tier=p_tier, quote_price=quote_price.astype(f),
            quote_quality=quote_quality.astype(f), news_mode=items[0], news_target=items[1], news_need=items[2],
            news_signed=items[3], news_remain=items[4], neg_days=neg_days, done=terminated | truncated, world=world)
        alive = ~s.done
        new = jax.tree.map(lambda n, o: jnp.where(alive, n, o), new, s)
        i32 = lambda x: jnp.where(alive, x, 0).astype(jnp.int32)
        info = DayInfo(
            sold=i32(sold), returned=i32(returned), expired=i32(expired), demand=i32(wanted),
            stockout=stockout & alive, revenue=revenue * alive, refunds=refunds * alive, order_cost=spent * alive,
            ordered=i32(units.sum(-1)), delivered=i32(delivered), **self._supplier_ranks(units > 0, s, i32),
            price_changed=price_ok & alive, funds=new.funds, net_worth=new.net_worth,
            invalid_prices=i32(jnp.sum(price_call & ~price_valid)), shelf_refused=~shelf_ok & alive, invalid_orders=i32(invalid_orders),
            refused_orders=i32(refused), merged_lots=i32(merged), alive=alive)
        reward = (new.net_worth - s.net_worth) * alive
        return self.observe(new, params), new, reward, terminated & alive, truncated & alive, info

    @staticmethod
    def _supplier_ranks(lines, s: EnvState, i32):
        """Per-day order-line diagnostics (ORACLE_AND_METRICS.md §3.3) from the quotes the orders used."""
        q, p = s.quote_quality, s.quote_price
        k = jnp.arange(q.shape[-1])
        ahead_q = (q[:, None, :] > q[:, :, None]) | ((q[:, None, :] == q[:, :, None]) & (
            (p[:, None, :] < p[:, :, None]) | ((p[:, None, :] == p[:, :, None]) & (k[None, :] < k[:, None]))))
        ahead_p = (p[:, None, :] < p[:, :, None]) | ((p[:, None, :] == p[:, :, None]) & (k[None, :] < k[:, None]))
        rank_q = 1 + ahead_q.sum(-1)                                      # [J, K]
        rank_p = 1 + ahead_p.sum(-1)
        return dict(order_lines=i32(lines.sum()), quality_rank_sum=i32(jnp.sum(jnp.where(lines, rank_q, 0))),
                    quality_first=i32(jnp.sum(lines & (rank_q == 1))), price_first=i32(jnp.sum(lines & (rank_p == 1))))

    # ------------------------------------------------------------------ views
    def observe(self, state: EnvState, params: EnvParams) -> Observation:
        cfg = self.config
        cal = params.open_day + state.day
        W = cfg.sales_window
        chrono = lambda ring: jnp.roll(ring, -(cal % W), axis=0)   # oldest first, yesterday last
        rating = reviews.window_rating(state.rev_window_count, state.rev_window_sum, state.rev_old_count,
                                       state.rev_old_sum, state.rating0)
        sup_return, sup_rating, return_rate = supplier_log.view(state.supplier_log)
        return Observation(
            day=state.day, funds=state.funds, capacity=params.capacity, shelf_capacity=params.shelf_capacity,
            category=jnp.asarray(self._category_of), net_worth=state.net_worth, prices=state.prices, shelf=state.shelf,
            on_hand=fsum(state.lot_store, -1), waiting=fsum(state.lot_wait, -1), incoming=fsum(state.pend_qty, 0),
            capacity_used=jnp.sum(state.lot_store, dtype=jnp.int32) / params.capacity,
            quote_price=state.quote_price, transport_min=state.world.transport_min,
            transport_max=state.world.transport_max,
            sales_price=chrono(state.hist_price), sales_units=chrono(state.hist_units),
            rating_mean=rating, rating_count=state.rev_window_count, return_rate=return_rate,
            supplier_return_rate=sup_return, supplier_rating=sup_rating,
            news_mentions=news.mentions(self._category_of, state.news_mode, state.news_target, cfg.num_products),
            history_profit=state.history_profit)

    def privileged(self, state: EnvState, params: EnvParams) -> Privileged:
        """Hidden supplier quality and today's news effects: for oracle policies only."""
        args = (state.news_mode, state.news_target, state.news_need, state.news_signed)
        return Privileged(quote_quality=state.quote_quality,
                          news_need=news.effect(params, self._category_of, *args, True),
                          news_supply=news.effect(params, params.supply_category, *args, False))

    def state_bytes(self, state: EnvState) -> int:
        """Bytes of one store's state."""
        return int(sum(x.nbytes for x in jax.tree.leaves(state) if hasattr(x, "nbytes")))
