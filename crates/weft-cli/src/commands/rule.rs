//! `rule add`: the rule from its text or from a JSON file.

use std::path::Path;

use weft_control::rule::RuleSpec;

use crate::error::CliError;
use crate::rule_syntax::parse_rule;

/// The rule given as text, or read as JSON from `json_file`.
pub(super) fn rule_from_args(
    text: Option<&str>,
    json_file: Option<&Path>,
) -> Result<RuleSpec, CliError> {
    if let Some(path) = json_file {
        let json = super::read_input(path)?;
        return serde_json::from_str(&json).map_err(|e| CliError::InvalidInput {
            message: format!("{} is not a valid rule: {e}", path.display()),
            hint: Some(
                "write a RuleSpec: {\"priority\":10,\"match\":{\"in_port\":\"vm1\"},\
                 \"actions\":[{\"output\":\"vm2\"}]}"
                    .into(),
            ),
        });
    }
    let text = text.unwrap_or_default();
    parse_rule(text).map_err(|e| {
        let caret = format!("{}^", " ".repeat(e.column.saturating_sub(1)));
        CliError::Usage {
            message: e.message,
            hint: Some(format!(
                "in the rule:\n  {text}\n  {caret}\nsee `weft rule add --help` for the syntax"
            )),
        }
    })
}
