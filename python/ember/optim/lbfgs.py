"""L-BFGS, as PyTorch's torch.optim.LBFGS: step(closure) runs up to
max_iter iterations, each a search direction from the last history_size
curvature pairs (the two-loop recursion) and a step along it, fixed (lr)
or chosen by a strong-Wolfe line search with cubic interpolation.

The parameters are handled as one flat vector; scalars (directional
derivatives, losses) are Python floats. Its control flow depends on the
values, so inside @ember.compile a step runs eagerly."""

from .._ops import cat
from ..autograd import enable_grad, no_grad
from .optimizer import Optimizer


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2),
    clamped to bounds (default: between x1 and x2); their midpoint when the
    cubic has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = disc ** 0.5
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step t along d meeting the strong Wolfe conditions: the loss falls
    by at least c1 t gtd and the slope shrinks to at most c2 |gtd|. First a
    bracket is found by growing t, then it is narrowed ("zoom").
    evaluate(t) -> (loss, flat gradient). Returns (loss, gradient, t,
    evaluations)."""
    d_norm = d.abs().max().item()
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = g_new.dot(d).item()
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    bracket = None
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket = [[t, f_new, g_new, gtd_new]]
            done = True
            break
        if gtd_new >= 0:  # past a minimum
            bracket = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        lo_step, hi_step = t + 0.01 * (t - t_prev), t * 10
        t_next = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(lo_step, hi_step))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
    if ls_iter == max_ls:  # no bracket: the last point
        bracket = [[0.0, f, g, gtd], [t, f_new, g_new, gtd_new]]
    insufficient = False
    low, high = (0, 1) if len(bracket) == 1 or bracket[0][1] <= bracket[-1][1] else (1, 0)
    while not done and ls_iter < max_ls:
        a, b = bracket[0][0], bracket[1][0]
        if abs(b - a) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(a, bracket[0][1], bracket[0][3], b, bracket[1][1], bracket[1][3])
        # keep t away from the bracket's ends, unless that made no progress before
        hi_t, lo_t = max(a, b), min(a, b)
        eps = 0.1 * (hi_t - lo_t)
        if min(hi_t - t, t - lo_t) < eps:
            if insufficient or t >= hi_t or t <= lo_t:
                t = hi_t - eps if abs(t - hi_t) < abs(t - lo_t) else lo_t + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = [t, f_new, g_new, gtd_new]
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = list(bracket[low])
            bracket[low] = [t, f_new, g_new, gtd_new]
    t, f_new, g_new, _ = bracket[low]
    return f_new, g_new, t, evals


class LBFGS(Optimizer):
    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        return cat([p.new_zeros((p.numel(),)) if p.grad is None else p.grad.reshape(-1) for p in self._params], 0)

    def _add(self, step, direction):
        """params += step * direction (a flat vector)."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].reshape(p.shape) * step)
            offset += n

    def _evaluate(self, closure, start, t, d):
        """(loss, flat gradient) at start + t d; the parameters return to start."""
        self._add(t, d)
        with enable_grad():
            loss = float(closure())
        g = self._flat_grad()
        for p, s in zip(self._params, start):
            p.copy_(s)
        return loss, g

    @no_grad()
    def step(self, closure):
        """Runs up to max_iter iterations; closure() re-evaluates the model
        and returns the loss (it must call backward). Returns the first loss."""
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that re-evaluates the model and returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change, history = group["tolerance_grad"], group["tolerance_change"], group["history_size"]
        search = group["line_search_fn"]
        if search not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            first_loss = closure()
        loss = float(first_loss)
        evals = 1
        state["func_evals"] += 1
        g = self._flat_grad()
        if g.abs().max().item() <= tol_grad:
            return first_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_g, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        it = 0
        while it < max_iter:
            it += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -g
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1.0
            else:
                y = g - prev_g
                s = d * t
                ys = y.dot(s).item()
                if ys > 1e-10:  # a pair that keeps the approximation positive-definite
                    if len(old_dirs) == history:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y).item()
                # the two-loop recursion: d = -H g
                al = [0.0] * len(old_dirs)
                q = -g
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q).item() * ro[i]
                    q = q - old_dirs[i] * al[i]
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be = old_dirs[i].dot(r).item() * ro[i]
                    r = r + old_stps[i] * (al[i] - be)
                d = r
            prev_g, prev_loss = g.clone(), loss
            t = min(1.0, 1.0 / g.abs().sum().item()) * lr if state["n_iter"] == 1 else lr
            gtd = g.dot(d).item()
            if gtd > -tol_change:  # not a descent direction any more
                break
            ls_evals = 0
            if search == "strong_wolfe":
                start = [p.clone() for p in self._params]
                loss, g, t, ls_evals = _strong_wolfe(lambda step: self._evaluate(closure, start, step, d),
                                                     t, d, loss, g, gtd)
                self._add(t, d)
                converged = g.abs().max().item() <= tol_grad
            else:
                self._add(t, d)
                converged = False
                if it != max_iter:
                    with enable_grad():
                        loss = float(closure())
                    g = self._flat_grad()
                    converged = g.abs().max().item() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if it == max_iter or evals >= max_eval or converged:
                break
            if (d * t).abs().max().item() <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag, prev_flat_grad=prev_g,
                     prev_loss=prev_loss)
        return first_loss
