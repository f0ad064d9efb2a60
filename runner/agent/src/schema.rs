//! Tool parameter schemas derived from the argument types the tools parse, so a schema
//! the model reads cannot drift from what the tool accepts.
//!
//! schemars writes a JSON Schema document; the chat protocol wants the plain object
//! schema the tools always sent. [`parameters`] therefore inlines nested argument types
//! (an array of edits is written out in place, with no `$defs`), drops what the document
//! adds (`$schema`, `title`, integer and float `format`s, a `#[serde(default)]`'s `default`:
//! the field's description says it, and the type's own doc comment as a `description`:
//! the tool's description, or the array's, says that) and writes an optional field as its
//! type alone (schemars adds `"null"`; absence is what makes it optional, through
//! `required`).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The parameters schema of a tool whose arguments are `T`.
pub fn parameters<T: JsonSchema>() -> Value {
    let schema = SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Value::Object(root) = &mut value {
        plain_object(root);
    }
    value
}

/// Normalises the schema of an argument type (the root, or the items of an array field).
fn plain_object(schema: &mut Map<String, Value>) {
    schema.remove("title");
    schema.remove("description");
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(property) = property {
                plain_property(property);
            }
        }
    }
}

/// Normalises the schema of one field.
fn plain_property(property: &mut Map<String, Value>) {
    property.remove("format");
    property.remove("default");
    if let Some(Value::Array(types)) = property.get("type") {
        let mut types: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        let single = (types.len() == 1).then(|| types.remove(0));
        if let Some(single) = single {
            property.insert("type".to_owned(), single);
        }
    }
    if let Some(Value::Object(items)) = property.get_mut("items") {
        if items.contains_key("properties") {
            plain_object(items);
        } else {
            plain_property(items);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// Arguments of a tool.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// A required text.
        name: String,
        /// An optional count.
        #[schemars(range(min = 1, max = 500))]
        count: Option<i64>,
        /// An optional text.
        filter: Option<String>,
    }

    /// One entry of a list argument.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Entry {
        /// The entry's text.
        text: String,
        /// Whether it counts twice (default false).
        #[serde(default)]
        twice: bool,
        /// Its weight.
        weight: Option<f64>,
    }

    /// Arguments holding a list of a nested type.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct ListArgs {
        /// The entries, in order.
        entries: Vec<Entry>,
        /// Labels.
        labels: Option<Vec<u32>>,
        /// Whether to hurry (default false).
        #[serde(default)]
        hurry: bool,
    }

    #[test]
    fn nested_types_are_inlined_and_defaults_left_to_the_descriptions() {
        assert_eq!(
            parameters::<ListArgs>(),
            serde_json::json!({
                "type": "object",
                "properties": {
                    "entries": {
                        "type": "array",
                        "description": "The entries, in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "text": { "type": "string", "description": "The entry's text." },
                                "twice": {
                                    "type": "boolean",
                                    "description": "Whether it counts twice (default false)."
                                },
                                "weight": { "type": "number", "description": "Its weight." }
                            },
                            "required": ["text"]
                        }
                    },
                    "labels": {
                        "type": "array",
                        "description": "Labels.",
                        "items": { "type": "integer", "minimum": 0 }
                    },
                    "hurry": { "type": "boolean", "description": "Whether to hurry (default false)." }
                },
                "required": ["entries"]
            })
        );
    }

    #[test]
    fn schemas_are_the_plain_object_schema_the_tools_sent() {
        assert_eq!(
            parameters::<Args>(),
            serde_json::json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "A required text." },
                    "count": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 500,
                        "description": "An optional count."
                    },
                    "filter": { "type": "string", "description": "An optional text." }
                },
                "required": ["name"]
            })
        );
    }
}
