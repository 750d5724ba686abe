//! The MLP family: one fully connected network per (group, config).
//!
//! Each model standardises its inputs with its group's training mean and
//! standard deviation (stored in the model), has one or more ReLU hidden
//! layers and one output: sigmoid + log-loss (PyTorch's
//! `BCEWithLogitsLoss`) for binary tasks, identity + squared error
//! (`MSELoss`) for regression, both averaged over the mini-batch. Training is
//! PyTorch-style: default initialisation (every weight and bias uniform in
//! `±1/sqrt(fan_in)`, which is what `nn.Linear`'s Kaiming-uniform with
//! `a = sqrt(5)` gives), mini-batches of `batch_size` rows drawn from a fresh
//! seeded permutation of the group's rows each epoch, and Adam (betas 0.9 /
//! 0.999, eps 1e-8, `weight_decay` added to the gradient as
//! `torch.optim.Adam` does) or plain SGD.
//!
//! Hyper-parameters go through the [`MlpParams`] builder and are checked once
//! into an [`MlpConfig`]; a fitted model is an [`MlpModel`]. The step kernel
//! is in [`kernel`], the pass-driver plug-in in [`grouped`].
//!
//! `--param` values are numbers; two parameters also take words, which the
//! grid encodes as numbers (see [`encode_param`]):
//! * `layers=64x32` (hidden widths, first to last) is encoded with four decimal
//!   digits per layer, `64x32` = `640032`; at most 3 layers of at most 9,999
//!   units. `layers=64` is the same as `hidden=64`.
//! * `optimizer=adam` is `0`, `optimizer=sgd` is `1`.

pub mod family;
pub mod grouped;
pub mod init;
pub mod kernel;
pub mod model;
pub mod params;
pub mod remote;

pub use family::{configs, Mlp, MlpWords};
pub use init::{epoch_permutation, init_params, Rng};
pub use model::{Dense, MlpModel};
pub use params::{
    decode_layers, display_param, encode_param, word_form, MlpConfig, MlpParams, Optimizer,
    MAX_LAYERS, PARAM_NAMES,
};
