use super::*;

const GOOD: &str = r#"
[[tools]]
name = "search"
description = "Find text in the repository"
url = "http://127.0.0.1:9000/tools/search"
side_effects = false
idempotent = true
[tools.args_schema]
type = "object"
required = ["pattern"]
properties = { pattern = { type = "string" } }

[[tools]]
name = "edit_file"
description = "Replace text in a file"
url = "http://127.0.0.1:9000/tools/edit_file"
sandbox_url = "http://127.0.0.1:9001/tools/edit_file"
timeout_ms = 5000
side_effects = true
args_schema = { type = "object" }
"#;

#[test]
fn loads_a_good_registry() {
    let registry = ToolRegistry::parse_toml(GOOD, "tools.toml").expect("valid");
    assert_eq!(registry.len(), 2);
    let search = registry.get("search").expect("search");
    assert_eq!(search.spec.timeout_ms, 30_000);
    assert!(
        search
            .check_args(&serde_json::json!({"pattern": "db.url"}))
            .is_empty()
    );
    assert!(!search.check_args(&serde_json::json!({})).is_empty());
    let edit = registry.get("edit_file").expect("edit_file");
    assert!(edit.spec.side_effects && !edit.spec.idempotent);
}

#[test]
fn bad_registrations_name_the_tool_and_field() {
    let cases = [
        (
            GOOD.replace("http://127.0.0.1:9000/tools/search", "ftp://x"),
            "search",
            "url",
        ),
        (
            GOOD.replace("timeout_ms = 5000", "timeout_ms = 0"),
            "edit_file",
            "timeout_ms",
        ),
        (
            GOOD.replace("side_effects = false\n", ""),
            "search",
            "side_effects",
        ),
        (
            GOOD.replace("idempotent = true", "idempotant = true"),
            "search",
            "idempotant",
        ),
        (
            GOOD.replace(
                "idempotent = true",
                "idempotent = true\nartifacts = [\"hits\", \"hits\"]",
            ),
            "search",
            "artifacts",
        ),
        (
            GOOD.replace("\"edit_file\"", "\"search\""),
            "search",
            "name",
        ),
        (
            GOOD.replace("type = \"object\"\nrequired", "type = 7\nrequired"),
            "search",
            "args_schema",
        ),
        (
            GOOD.replace("https://", "")
                .replace("sandbox_url = \"http://", "sandbox_url = \"mailto://"),
            "edit_file",
            "sandbox_url",
        ),
    ];
    for (text, tool, field) in cases {
        let error = ToolRegistry::parse_toml(&text, "tools.toml").unwrap_err();
        let shown = error.to_string();
        assert!(
            shown.contains(&format!("{tool:?}")) && shown.contains(field),
            "expected tool {tool} and field {field} in: {shown}"
        );
    }
}

#[test]
fn mcp_servers_are_read_beside_the_tools_and_checked() {
    let text = format!(
        "{GOOD}\n[[mcp]]\nname = \"gh\"\nurl = \"http://127.0.0.1:7301/mcp\"\n\
         headers = {{ Authorization = \"Bearer ${{GH_TOKEN}}\" }}\ndeny = [\"delete_repo\"]\n"
    );
    let env = |var: &str| (var == "GH_TOKEN").then(|| "ghp-secret".to_string());
    let file = ToolsFile::parse_toml(&text, "tools.toml", &env).expect("valid");
    assert_eq!(file.registry.len(), 2);
    assert_eq!(file.mcp.len(), 1);
    assert!(!file.mcp[0].offers("delete_repo") && file.mcp[0].offers("create_issue"));
    // A file with servers is not a plain registry, and a missing variable is named.
    let error = ToolRegistry::parse_toml(&text, "tools.toml").unwrap_err();
    assert!(error.to_string().contains("[[mcp]] gh"), "{error}");
    let error = ToolsFile::parse_toml(&text, "tools.toml", &|_| None).unwrap_err();
    let shown = error.to_string();
    assert!(
        shown.contains("GH_TOKEN") && shown.contains("headers"),
        "{shown}"
    );
    let twice = format!("{text}\n[[mcp]]\nname = \"gh\"\nurl = \"http://127.0.0.1:1/mcp\"\n");
    let error = ToolsFile::parse_toml(&twice, "tools.toml", &env).unwrap_err();
    assert!(error.to_string().contains("registered twice"), "{error}");
    let typo = text.replace("deny =", "denny =");
    let error = ToolsFile::parse_toml(&typo, "tools.toml", &env).unwrap_err();
    assert!(error.to_string().contains("denny"), "{error}");
}
