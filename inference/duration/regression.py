"""The regression half of the duration predictor: a small torch MLP on log run time.

Input: ``[text vector | shape row]`` (:mod:`inference.duration.features`), standardised with
the training rows' mean and std (saved with the model; a column constant in training is
left unscaled) and clipped to ±6. Target: ``log(max(run time, 1 s))``,
standardised. Loss: Huber (δ = 1 standard deviation) — close to L1 for the heavy tail, so
the fit aims at the *median* run time of similar jobs rather than a mean pulled up by a few
week-long outliers. **Right-censored rows** (``censored`` mask: jobs still running when the
training data was cut, whose ``y`` is the log of the time they had run by then — a lower
bound) cost only when the prediction falls *below* that bound (a one-sided Huber, as in a
Tobit model): without them a model trained at a cut sees only the jobs short enough to have
finished, and learns that jobs are shorter than they are. Adam, mini-batches, early stopping on a validation set (the latest
part of the training split, in submission order: never a random split of future and past).

torch is imported inside the functions, so importing :mod:`inference.duration` stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: standardised inputs are clipped here: a value never seen in training (a QoS class, a huge
#: request) must not push the MLP into wild extrapolation
CLIP = 6.0


@dataclass
class FitReport:
    epochs: int = 0
    best_epoch: int = 0
    train_loss: float = float("nan")
    val_loss: float = float("nan")
    history: list[tuple[float, float]] = field(default_factory=list)  # (train, val) per epoch


def build_mlp(in_dim: int, hidden: int, layers: int, dropout: float = 0.1) -> Any:
    import torch

    mods: list[Any] = []
    width = in_dim
    for _ in range(layers):
        mods += [torch.nn.Linear(width, hidden), torch.nn.GELU(), torch.nn.Dropout(dropout)]
        width = hidden
    mods.append(torch.nn.Linear(width, 1))
    return torch.nn.Sequential(*mods)


def censored_huber(pred: Any, y: Any, censored: Any, delta: float = 1.0) -> Any:
    """Mean Huber loss; on a censored row only the shortfall ``max(y − pred, 0)`` counts."""
    import torch

    residual = torch.where(censored, torch.clamp(y - pred, min=0.0), pred - y)
    a = residual.abs()
    return torch.where(a <= delta, 0.5 * a * a, delta * (a - 0.5 * delta)).mean()


class MlpRegressor:
    """``fit(X, y, X_val, y_val)`` then ``predict(X)``; y in log seconds."""

    def __init__(self, in_dim: int, hidden: int = 128, layers: int = 2, *, seed: int = 0) -> None:
        import torch

        torch.manual_seed(seed)
        self.in_dim, self.hidden, self.layers, self.seed = in_dim, hidden, layers, seed
        self.net = build_mlp(in_dim, hidden, layers)
        self.x_mean = np.zeros(in_dim, np.float32)
        self.x_std = np.ones(in_dim, np.float32)
        self.y_mean, self.y_std = 0.0, 1.0

    def _x(self, x: np.ndarray) -> Any:
        import torch

        z = (np.asarray(x, np.float32) - self.x_mean) / self.x_std
        return torch.from_numpy(np.clip(z, -CLIP, CLIP).astype(np.float32))

    def fit(self, x: np.ndarray, y: np.ndarray, x_val: np.ndarray | None = None, y_val: np.ndarray | None = None,
            *, epochs: int = 80, batch: int = 256, lr: float = 2e-3, weight_decay: float = 1e-4,
            patience: int = 12, progress: Any = None, censored: np.ndarray | None = None) -> FitReport:  # fmt: skip
        """Train; keeps the weights of the best validation epoch (without validation rows: of the lowest
        training loss among the ``epochs``, which all run).
        ``progress``: a callable ``(epoch, epochs)`` for a progress bar. ``censored``: bool per
        training row, True where ``y`` is only a lower bound (see the module docstring); the
        standardisation uses the uncensored rows. Validation rows are never censored."""
        import torch

        x = np.asarray(x, np.float32)
        y = np.asarray(y, np.float32)
        cens = np.zeros(len(y), bool) if censored is None else np.asarray(censored, bool)
        if cens.shape != y.shape:
            raise ValueError("one censored flag per training row")
        if cens.all():
            raise ValueError("every training row is censored")
        self.x_mean = x.mean(axis=0)
        std = x.std(axis=0)
        self.x_std = np.where(std < 1e-6, 1.0, np.maximum(std, 1e-2)).astype(np.float32)
        y_obs = y[~cens]
        self.y_mean, self.y_std = float(y_obs.mean()), max(float(y_obs.std()), 1e-3)
        xt, yt = self._x(x), torch.from_numpy((y - self.y_mean) / self.y_std)
        ct = torch.from_numpy(cens)
        has_val = x_val is not None and y_val is not None and len(y_val) > 0
        if has_val:
            xv = self._x(x_val)  # type: ignore[arg-type]
            yv = torch.from_numpy((np.asarray(y_val, np.float32) - self.y_mean) / self.y_std)
        opt = torch.optim.AdamW(self.net.parameters(), lr=lr, weight_decay=weight_decay)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, epochs))
        loss_fn = torch.nn.HuberLoss(delta=1.0)
        gen = torch.Generator().manual_seed(self.seed)
        report = FitReport()
        best, best_state, since = float("inf"), None, 0
        for epoch in range(epochs):
            self.net.train()
            perm = torch.randperm(len(yt), generator=gen)
            total = 0.0
            for lo in range(0, len(perm), batch):
                sel = perm[lo : lo + batch]
                opt.zero_grad()
                loss = censored_huber(self.net(xt[sel]).squeeze(-1), yt[sel], ct[sel])
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(sel)
            sched.step()
            train_loss = total / max(1, len(yt))
            val_loss = train_loss
            if has_val:
                self.net.eval()
                with torch.inference_mode():
                    val_loss = float(loss_fn(self.net(xv).squeeze(-1), yv))
            report.history.append((train_loss, val_loss))
            report.epochs = epoch + 1
            if progress is not None:
                progress(epoch + 1, epochs)
            if val_loss < best - 1e-5:
                best, since, report.best_epoch = val_loss, 0, epoch + 1
                best_state = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
            else:
                since += 1
                if has_val and since >= patience:
                    break
        if best_state is not None:
            self.net.load_state_dict(best_state)
        self.net.eval()
        report.train_loss, report.val_loss = report.history[-1][0], best
        return report

    def predict(self, x: np.ndarray) -> np.ndarray:
        """float64 ``[n]``: predicted log run time (seconds)."""
        import torch

        if len(x) == 0:
            return np.zeros(0)
        self.net.eval()
        with torch.inference_mode():
            z = self.net(self._x(x)).squeeze(-1).numpy().astype(np.float64)
        return z * self.y_std + self.y_mean

    # -- persistence (inference.duration.io) ----------------------------------------------------
    def state(self) -> dict[str, Any]:
        import torch

        return {"net": self.net.state_dict(), "x_mean": torch.from_numpy(self.x_mean),
                "x_std": torch.from_numpy(self.x_std), "y": torch.tensor([self.y_mean, self.y_std])}  # fmt: skip

    def load_state(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.x_mean = state["x_mean"].numpy().astype(np.float32)
        self.x_std = state["x_std"].numpy().astype(np.float32)
        self.y_mean, self.y_std = (float(v) for v in state["y"].tolist())
        self.net.eval()
