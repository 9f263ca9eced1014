mod keys;
mod publish;
mod view;
