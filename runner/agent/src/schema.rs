//! Tool parameter schemas derived from the argument types the tools parse, so a schema
//! the model reads cannot drift from what the tool accepts.
//!
//! schemars writes a JSON Schema document; the chat protocol wants the plain object
//! schema the tools always sent. [`parameters`] therefore drops what the document adds
//! (`$schema`, `title`, integer `format`s, and the type's own doc comment as a
//! `description`: the tool's description says that) and writes an optional field as its type
//! alone (schemars adds `"null"`; absence is what makes it optional, through `required`).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The parameters schema of a tool whose arguments are `T`.
pub fn parameters<T: JsonSchema>() -> Value {
    let schema = SchemaSettings::draft2020_12()
        .with(|s| s.meta_schema = None)
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Value::Object(root) = &mut value {
        root.remove("title");
        root.remove("description");
        if let Some(Value::Object(properties)) = root.get_mut("properties") {
            for property in properties.values_mut() {
                if let Value::Object(property) = property {
                    property.remove("format");
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
                }
            }
        }
    }
    value
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
